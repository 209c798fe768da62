"""Offline mode: synthesize_many equals one-by-one synthesis; documents resume after a crash without redoing work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.audio import decode_audio
from rtvox.constants import SAMPLE_RATE
from rtvox.runtime import Synthesizer
from rtvox.runtime.offline import PARTS_SUFFIX, speak_document, split_document, synthesize_many
from rtvox.runtime.types import SynthesisRequest

from .conftest import assert_audio_close

PARAGRAPHS = [
    "第一章。今天天气很好，我们去公园散步吧。",
    "It was a bright cold day in April, and the clocks were striking thirteen.",
    "然后回家吃饭，晚上看一本书。",
    "Hello again. This is the last paragraph of the tiny book.",
]


def test_synthesize_many_equals_synthesize_per_request(rsynth: Synthesizer) -> None:
    requests = [SynthesisRequest(text=p, speed=1.0 + 0.1 * i) for i, p in enumerate(PARAGRAPHS * 2)]
    seen: list[tuple[int, int]] = []
    # max_batch=3: chunks of different requests share batches, in length order, across several windows
    results = list(synthesize_many(rsynth, requests, max_batch=3, progress=lambda d, t: seen.append((d, t))))
    assert len(results) == len(requests)
    for request, result in zip(requests, results, strict=True):
        want = rsynth.synthesize(request.text, speed=request.speed)
        assert [c.durations for c in result.chunks] == [c.durations for c in want.chunks]
        assert_audio_close(result.audio, want.audio)
    assert seen[-1][0] == seen[-1][1] == sum(len(r.chunks) for r in results)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_split_document_keeps_paragraphs_whole_and_bounded() -> None:
    text = "\n\n".join(PARAGRAPHS) + "\n" + "很长的句子。" * 100
    segments = split_document(text, 120)
    assert all(len(s) <= 120 for s in segments)
    assert "".join("".join(segments).split()) == "".join(text.split())  # nothing lost or repeated
    assert segments[0].split("\n")[0] == PARAGRAPHS[0]


class Crash(RuntimeError):
    pass


def test_document_resumes_after_a_crash_without_redoing_segments(
    rsynth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "\n".join(PARAGRAPHS * 3)
    base = SynthesisRequest(text="", voice="ben")
    clean = tmp_path / "clean.wav"
    seconds = speak_document(rsynth, text, clean, "wav", base, max_batch=2)
    assert not (tmp_path / ("clean.wav" + PARTS_SUFFIX)).exists()

    out = tmp_path / "book.wav"
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", 80)  # several segments
    real_step = rsynth.run_step
    calls = {"n": 0}

    def crashing_step(jobs: list) -> list:  # type: ignore[type-arg]
        calls["n"] += 1
        if calls["n"] == 4:
            raise Crash("power cut")
        return real_step(jobs)

    monkeypatch.setattr(rsynth, "run_step", crashing_step)
    with pytest.raises(Crash):
        speak_document(rsynth, text, out, "wav", base, max_batch=2)
    parts = tmp_path / ("book.wav" + PARTS_SUFFIX)
    saved = sorted(parts.glob("segment-*.npy"))
    assert saved and not out.exists()  # what was done is kept, nothing half-written
    monkeypatch.setattr(rsynth, "run_step", real_step)
    prepared: list[str] = []
    real_prepare = rsynth.prepare
    monkeypatch.setattr(rsynth, "prepare", lambda r, front=None: prepared.append(r.text) or real_prepare(r, front))
    progress: list[tuple[int, int]] = []
    resumed = speak_document(rsynth, text, out, "wav", base, max_batch=2, progress=lambda d, t: progress.append((d, t)))
    assert progress[0] == (len(saved), progress[0][1]) and progress[-1][0] == progress[-1][1]
    total_segments = progress[-1][1]
    assert len(prepared) == total_segments - len(saved)  # finished segments were not synthesized again
    assert not parts.exists()
    audio, sr = decode_audio(out.read_bytes())
    assert sr == SAMPLE_RATE and resumed == pytest.approx(len(audio) / SAMPLE_RATE)
    # the resumed file equals an uninterrupted run with the same segmentation
    uninterrupted = tmp_path / "again.wav"
    speak_document(rsynth, text, uninterrupted, "wav", base, max_batch=2)
    again, _ = decode_audio(uninterrupted.read_bytes())
    assert_audio_close(audio, again, rel=1e-3)  # wav is 16-bit: compare after the same quantization
    assert seconds > 0


def test_changed_settings_restart_instead_of_mixing_runs(rsynth: Synthesizer, tmp_path: Path) -> None:
    out = tmp_path / "book.wav"
    parts = tmp_path / ("book.wav" + PARTS_SUFFIX)
    parts.mkdir()
    (parts / "manifest.json").write_text('{"fingerprint": "another text"}')
    np.save(parts / "segment-000000.npy", np.ones(10, np.float32))  # would be wrong audio if reused
    speak_document(rsynth, PARAGRAPHS[0], out, "wav", SynthesisRequest(text=""))
    audio, _ = decode_audio(out.read_bytes())
    want = rsynth.synthesize(PARAGRAPHS[0]).audio
    assert len(audio) == len(want)


def test_a_document_skips_what_it_cannot_speak_and_says_so(rsynth: Synthesizer, tmp_path: Path) -> None:
    out = tmp_path / "mixed.wav"
    said: list[str] = []
    text = PARAGRAPHS[0] + "\n" + "😀" * 10 + "\n" + PARAGRAPHS[1] + " Привет."
    seconds = speak_document(rsynth, text, out, "wav", SynthesisRequest(text=""), warn=said.append)
    assert seconds > 0 and decode_audio(out.read_bytes())[0].size > 0
    assert any("😀" in w for w in said) and any("Привет" in w for w in said)
    with pytest.raises(Exception, match="nothing to speak"):  # a document with nothing speakable at all
        speak_document(rsynth, "😀😀\n🎉", tmp_path / "none.wav", "wav", SynthesisRequest(text=""))
    assert not (tmp_path / ("none.wav" + PARTS_SUFFIX)).exists()


def test_resumed_parts_are_not_reused_after_the_voice_or_lexicon_changed(rsynth: Synthesizer, tmp_path: Path) -> None:
    from dataclasses import replace as dc_replace

    from rtvox.runtime.offline import _fingerprint
    from rtvox.text import Lexicon

    base = SynthesisRequest(text="", voice="ben")
    segments = split_document("\n".join(PARAGRAPHS), 200)
    first = _fingerprint(rsynth, segments, base)
    assert _fingerprint(rsynth, segments, base) == first
    assert _fingerprint(rsynth, segments, dc_replace(base, voice="anna")) != first
    voice = rsynth.voices.get("ben")
    original = rsynth.frontend.lexicon
    try:
        rsynth.frontend.lexicon = Lexicon.from_dict({"重庆": "zhong4 qing4"})
        assert _fingerprint(rsynth, segments, base) != first
    finally:
        rsynth.frontend.lexicon = original
    emb = voice.embedding.copy()
    emb[0] += 0.5  # a clone re-made under the same name: another embedding
    assert _fingerprint(rsynth, segments, dc_replace(base, voice=None, speaker_embedding=emb)) != first
    for name, other in (("device", torch.device("cuda")), ("dtype", torch.bfloat16)):
        kept = getattr(rsynth, name)
        try:  # a run resumed on another device or precision: other engines, so other audio
            setattr(rsynth, name, other)
            assert _fingerprint(rsynth, segments, base) != first, name
        finally:
            setattr(rsynth, name, kept)
    assert _fingerprint(rsynth, segments, base) == first


def test_synthesize_many_refuses_items_that_are_not_requests(rsynth: Synthesizer) -> None:
    from rtvox.errors import InputError

    with pytest.raises(InputError, match="got NoneType"):
        list(synthesize_many(rsynth, [SynthesisRequest(text="One."), None, SynthesisRequest(text="Two.")]))  # type: ignore[list-item]
    with pytest.raises(InputError, match="got str"):
        list(synthesize_many(rsynth, ["One."]))  # type: ignore[list-item]


def test_split_document_does_not_cut_numbers_or_abbreviations() -> None:
    text = "x" * 60 + " Pi is 3.14159 and Dr. Smith paid $3.50, then left"
    segments = split_document(text, 90)
    assert all(len(s) <= 90 for s in segments)
    assert not any(s.endswith(("3.", "Dr.", "$3.")) for s in segments)
    assert "".join("".join(segments).split()) == "".join(text.split())


def test_one_run_per_output_and_no_empty_parts_left_after_a_failure(
    rsynth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    from rtvox.errors import InputError

    out = tmp_path / "book.wav"
    with open(tmp_path / ".book.wav.lock", "w") as held:  # another run holds this output
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(InputError, match="another rtvox run is writing"):
            speak_document(rsynth, PARAGRAPHS[0], out, "wav", SynthesisRequest(text=""))

    def failing_step(jobs: list) -> list:  # type: ignore[type-arg]
        raise Crash("engine down before any segment")

    monkeypatch.setattr(rsynth, "run_step", failing_step)
    with pytest.raises(Crash):
        speak_document(rsynth, PARAGRAPHS[0], out, "wav", SynthesisRequest(text=""))
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no parts folder, no lock file, no output


def test_a_document_runs_the_frontend_once_per_segment(
    rsynth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", 60)  # several segments
    text = "\n".join(PARAGRAPHS)
    plain = tmp_path / "plain.wav"
    speak_document(rsynth, text, plain, "wav", SynthesisRequest(text=""), max_batch=2)
    seen: list[str] = []
    process = rsynth.frontend.process

    def counted(text: str):  # type: ignore[no-untyped-def]
        seen.append(text)
        return process(text)

    monkeypatch.setattr(rsynth.frontend, "process", counted)
    out = tmp_path / "once.wav"
    speak_document(rsynth, text, out, "wav", SynthesisRequest(text=""), max_batch=2)
    assert len(seen) == len(split_document(text, 60)) > 1 and len(set(seen)) == len(seen)
    assert_audio_close(decode_audio(out.read_bytes())[0], decode_audio(plain.read_bytes())[0])


def test_a_document_to_a_device_writes_nothing_beside_it(rsynth: Synthesizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rtvox speak @book.txt -o /dev/null` (a timing run) or a FIFO: no parts folder or lock file in /dev, not
    even while it runs."""
    beside = [Path("/dev/null" + PARTS_SUFFIX), Path("/dev/.null.lock")]
    seen: list[bool] = []
    real_step = rsynth.run_step

    def step(jobs: list) -> list:  # type: ignore[type-arg]
        seen.append(any(p.exists() for p in beside))
        return real_step(jobs)

    monkeypatch.setattr(rsynth, "run_step", step)
    seconds = speak_document(rsynth, PARAGRAPHS[1], Path("/dev/null"), "wav", SynthesisRequest(text=""))
    assert seconds > 0 and seen and not any(seen)
    assert not any(p.exists() for p in beside) and Path("/dev/null").is_char_device()
