"""Word and phoneme times from chunk phonemes and frame durations."""

from __future__ import annotations

import numpy as np
import pytest

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.runtime.types import AudioChunk
from rtvox.server.timestamps import Timeline
from rtvox.text import Frontend

FRAME_S = HOP_LENGTH / SAMPLE_RATE


def _chunks_with_durations(text: str, frames_per_phoneme: int) -> tuple[Frontend, list[AudioChunk]]:
    frontend = Frontend()
    front = frontend.process(text)
    chunks = []
    for k, planned in enumerate(front.chunks):
        durations = tuple(frames_per_phoneme for _ in planned.phonemes)
        audio = np.zeros(sum(durations) * HOP_LENGTH, np.float32)
        chunks.append(
            AudioChunk(
                k, audio, planned.text, k == len(front.chunks) - 1, phonemes=planned.phonemes, durations=durations
            )
        )
    return frontend, chunks


def test_words_and_phonemes_line_up_with_frames() -> None:
    text = "Hello world, 你好。"
    frontend, chunks = _chunks_with_durations(text, 2)
    timeline = Timeline(frontend.process(text))
    for chunk in chunks:
        timeline.add(chunk, len(chunk.audio))
    words = [w.text for w in timeline.words]
    assert words == ["Hello", "world", "你好"]
    hello_phones = len(frontend.process("Hello").tokens[0].phonemes)
    assert timeline.words[0].start == 0.0
    assert timeline.words[0].end == pytest.approx(hello_phones * 2 * FRAME_S, abs=1e-4)
    # The next word starts after the boundary token that follows "Hello".
    assert timeline.words[1].start == pytest.approx((hello_phones + 1) * 2 * FRAME_S, abs=1e-4)
    ends = [p.end for p in timeline.phonemes]
    assert ends == sorted(ends)
    assert timeline.phonemes[-1].end == pytest.approx(sum(len(c.audio) for c in chunks) / SAMPLE_RATE, abs=1e-4)


def test_times_continue_across_chunks_and_scale_with_stretch() -> None:
    text = "第一句话比较长一些，我们需要它被切成好几个块。" * 4 + " And some English words to end with."
    frontend, chunks = _chunks_with_durations(text, 3)
    assert len(chunks) > 1
    timeline = Timeline(frontend.process(text))
    for chunk in chunks:
        timeline.add(chunk, len(chunk.audio) // 2)  # as if played twice as fast
    total = sum(len(c.audio) // 2 for c in chunks) / SAMPLE_RATE
    assert timeline.phonemes[-1].end == pytest.approx(total, abs=1e-3)
    starts = [w.start for w in timeline.words]
    assert starts == sorted(starts)
    assert len(timeline.words) == sum(1 for t in frontend.process(text).tokens if t.phonemes)


def test_unplanned_chunk_gets_phonemes_but_no_words() -> None:
    frontend = Frontend()
    timeline = Timeline(frontend.process("Hello world."))
    odd = AudioChunk(0, np.zeros(4 * HOP_LENGTH, np.float32), "x", True, phonemes=("a", "b"), durations=(2, 2))
    words, phonemes = timeline.add(odd, len(odd.audio))
    assert words == []
    assert [p.phoneme for p in phonemes] == ["a", "b"]


def test_a_stress_mark_joins_the_phone_after_it_from_its_own_start() -> None:
    """The model's English stress marks are tokens with frames of their own; the phoneme times show phones."""
    text = "Hello again."
    frontend, chunks = _chunks_with_durations(text, 2)
    planned = chunks[0].phonemes
    marks = [i for i, p in enumerate(planned) if p.endswith(("ˈ", "ˌ"))]
    assert marks, planned  # English words carry stress marks as tokens
    timeline = Timeline(frontend.process(text))
    timeline.add(chunks[0], len(chunks[0].audio))
    names = [p.phoneme for p in timeline.phonemes]
    assert len(names) == len(planned) - len(marks)
    assert not any(n.rpartition(":")[2] in ("ˈ", "ˌ") for n in names)
    first = marks[0]
    joined = timeline.phonemes[first]  # the phone after the first mark, its time starting at the mark
    assert joined.phoneme == planned[first] + planned[first + 1].rpartition(":")[2]
    assert joined.start == pytest.approx(first * 2 * FRAME_S, abs=1e-4)
    assert joined.end == pytest.approx((first + 2) * 2 * FRAME_S, abs=1e-4)
    assert timeline.phonemes[-1].end == pytest.approx(len(chunks[0].audio) / SAMPLE_RATE, abs=1e-4)
