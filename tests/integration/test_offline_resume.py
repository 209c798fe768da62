"""Offline documents after a hard kill: a resumed run batches like an uninterrupted one (the same output, byte for
byte), leaves no half-encoded file behind, and `synthesize_many` names the request it cannot speak."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rtvox.errors import InputError, TextError, VoiceNotFoundError
from rtvox.models.bundle import ModelBundle
from rtvox.runtime import Synthesizer
from rtvox.runtime.offline import PARTS_SUFFIX, speak_document, synthesize_many
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import AudioChunk, SynthesisRequest

LINES = [
    "第一章。今天天气很好，我们去公园散步吧。",
    "It was a bright cold day in April, and the clocks were striking thirteen.",
    "然后回家吃饭，晚上看一本书。",
    "Hello again. This is the last paragraph of the tiny book.",
    "2024年3月15日，我们早上7点30分出发。",
    "Dr. Smith paid $3,450.75 on 2023-11-02.",
]


@pytest.fixture
def vsynth(synth: Synthesizer) -> Synthesizer:
    """Durations that vary from phoneme to phoneme, so rows of a batch differ in length and padding matters."""
    assert isinstance(synth.bundle, ModelBundle)
    with torch.no_grad():
        synth.bundle.acoustic.variance.duration.head.bias.fill_(1.3)
    return synth


class Killed(BaseException):
    """A hard kill between two part writes (nothing after it runs, as with SIGKILL)."""


def test_a_resumed_document_is_batched_as_an_uninterrupted_one(
    vsynth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk's audio depends (in float rounding) on the batch it shares: the resumed run must form the same
    batches as an uninterrupted run, whatever part of the document was already saved, so the files are equal."""
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", 60)  # several segments, several per window
    text = "\n".join(LINES * 2)
    base = SynthesisRequest(text="", voice="ben")
    batches: list[list[tuple[str, int]]] = []
    real_step = vsynth.run_step

    def step(jobs: list[ChunkJob]) -> list[AudioChunk]:
        batches.append([(j.prepared.request.text, j.index) for j in jobs])
        return real_step(jobs)

    monkeypatch.setattr(vsynth, "run_step", step)
    clean = tmp_path / "clean.wav"
    speak_document(vsynth, text, clean, "wav", base, max_batch=3)
    clean_batches, batches[:] = list(batches), []

    # killed after the second part write: a window's parts are on disk only in part
    import rtvox.runtime.offline as offline

    real_write = offline.atomic_write_bytes
    writes = {"n": 0}

    def write(path: Path, data: bytes) -> Path:
        if Path(path).name.startswith("segment-"):
            writes["n"] += 1
            if writes["n"] == 2:
                raise Killed
        return real_write(path, data)

    out = tmp_path / "book.wav"
    monkeypatch.setattr(offline, "atomic_write_bytes", write)
    with pytest.raises(Killed):
        speak_document(vsynth, text, out, "wav", base, max_batch=3)
    monkeypatch.setattr(offline, "atomic_write_bytes", real_write)
    assert len(list((tmp_path / ("book.wav" + PARTS_SUFFIX)).glob("segment-*.npy"))) == 1 and not out.exists()
    batches[:] = []
    speak_document(vsynth, text, out, "wav", base, max_batch=3)
    resumed = batches
    assert resumed and all(b in clean_batches for b in resumed)  # every batch as an uninterrupted run formed it
    assert out.read_bytes() == clean.read_bytes()


def test_a_kill_during_the_final_encode_leaves_no_half_written_file_behind(vsynth: Synthesizer, tmp_path: Path) -> None:
    """SIGKILL during the encode leaves the encoder's temp file (`.book.mp3.XXXXXXXX.tmp`) beside the output: the
    next run of that output removes it rather than leaving a half-written file there for good."""
    out = tmp_path / "book.wav"
    stale = tmp_path / ".book.wav.k1ll3d_x.tmp"
    stale.write_bytes(b"RIFF half an encode")
    other = tmp_path / ".notes.wav.abcdefgh.tmp"  # another output's: not ours to remove
    other.write_bytes(b"x")
    speak_document(vsynth, LINES[1], out, "wav", SynthesisRequest(text=""))
    assert out.is_file() and not stale.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["book.wav", other.name])


def test_synthesize_many_names_the_request_it_cannot_speak(vsynth: Synthesizer) -> None:
    texts = ["First.", "第二句。", "😀😀", "Fourth."]
    with pytest.raises(TextError, match=r"^request 2 of the batch: nothing to speak") as caught:
        list(synthesize_many(vsynth, [SynthesisRequest(text=t) for t in texts], max_batch=2))
    assert isinstance(caught.value.__cause__, TextError) and caught.value.param == caught.value.__cause__.param
    with pytest.raises(VoiceNotFoundError, match=r"^request 1 of the batch: .*nobody"):
        bad = [SynthesisRequest(text="One."), SynthesisRequest(text="Two.", voice="nobody")]
        list(synthesize_many(vsynth, bad))
    with pytest.raises(InputError, match="got NoneType at item 1"):
        list(synthesize_many(vsynth, [SynthesisRequest(text="One."), None]))  # type: ignore[list-item]
    # order kept around the good ones
    good = [SynthesisRequest(text=t) for t in (LINES[0], LINES[3], LINES[2])]
    got = [r.audio for r in synthesize_many(vsynth, good, max_batch=2)]
    want = [vsynth.synthesize(r.text).audio for r in good]
    assert [len(a) for a in got] == [len(a) for a in want]


def test_a_lock_on_a_file_the_last_run_removed_does_not_count(
    vsynth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A ends (removes its lock file) between run B's open and B's lock: B's lock is on a removed file, and a
    third run would open a new one and lock it too, two runs writing one output; B is refused instead."""
    import fcntl

    out = tmp_path / "book.wav"
    lock_path = tmp_path / ".book.wav.lock"
    real_flock = fcntl.flock

    def flock_after_the_last_run_ended(fd: object, op: int) -> None:
        lock_path.unlink(missing_ok=True)  # run A's cleanup, just before B takes the lock
        real_flock(fd, op)  # type: ignore[arg-type]

    monkeypatch.setattr(fcntl, "flock", flock_after_the_last_run_ended)
    with pytest.raises(InputError, match="another rtvox run is writing"):
        speak_document(vsynth, LINES[1], out, "wav", SynthesisRequest(text=""))
    monkeypatch.undo()
    assert not out.exists()
    speak_document(vsynth, LINES[1], out, "wav", SynthesisRequest(text=""))
    assert out.is_file() and not lock_path.exists()
