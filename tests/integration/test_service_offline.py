"""`rtvox speak @book.txt`: the offline document path through the CLI, resumable parts removed at the end; the
parts are encoded into the output one at a time, with their own progress, and kept until the output is whole."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtvox.audio import decode_audio
from rtvox.cli import app
from rtvox.constants import SAMPLE_RATE
from rtvox.runtime import Synthesizer
from rtvox.runtime.offline import PARTS_SUFFIX, speak_document, split_document
from rtvox.runtime.types import SynthesisRequest

# 34 characters: with segments of 60, each line of a book of these lines is one segment of the same length
LINE = "It was a bright cold day in April."
SEGMENT_CHARS = 60


def test_speak_at_file_writes_the_whole_document(tiny_model: Path, tmp_path: Path) -> None:
    book = tmp_path / "book.txt"
    book.write_text("第一章\n\n今天天气很好，我们去公园散步吧。\nIt was a bright cold day in April.\n" * 20, "utf-8")
    out = tmp_path / "book.mp3"
    result = CliRunner().invoke(
        app, ["speak", f"@{book}", "-o", str(out), "--model", str(tiny_model), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    assert "synthesizing" in result.output and "writing mp3" in result.output  # the final encode has its own bar
    audio, sr = decode_audio(out.read_bytes())
    assert sr == SAMPLE_RATE and len(audio) > SAMPLE_RATE
    assert not (tmp_path / "book.mp3.parts").exists()


def test_writing_a_document_reports_its_own_progress(
    synth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", SEGMENT_CHARS)
    text = "\n".join([LINE] * 6)
    n = len(split_document(text, SEGMENT_CHARS))
    events: list[tuple[str, int, int]] = []
    out = tmp_path / "book.mp3"
    seconds = speak_document(
        synth,
        text,
        out,
        "mp3",
        SynthesisRequest(text=""),
        max_batch=2,
        progress=lambda done, total: events.append(("synthesizing", done, total)),
        write_progress=lambda done, total: events.append(("writing", done, total)),
    )
    assert n == 6
    writing = [e for e in events if e[0] == "writing"]
    assert writing == [("writing", i, n) for i in range(n + 1)]  # segment by segment, after the synthesis
    assert events[: -len(writing)][-1] == ("synthesizing", n, n)
    audio, sr = decode_audio(out.read_bytes())
    assert sr == SAMPLE_RATE and len(audio) == round(seconds * SAMPLE_RATE)  # mp3 keeps the exact length
    assert not (tmp_path / ("book.mp3" + PARTS_SUFFIX)).exists()


def test_writing_a_document_holds_one_part_at_a_time(
    synth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The book's audio is never gathered in memory: while the parts are encoded, the Python and numpy memory
    allocated (tracemalloc) stays a few parts' worth; gathering them, as before, took at least twice the book."""
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", SEGMENT_CHARS)
    text = "\n".join([LINE] * 24)  # 24 parts of equal length
    peaks: list[int] = []

    def write_progress(done: int, total: int) -> None:
        if done == 0:
            tracemalloc.start()
        elif done == total:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    try:
        seconds = speak_document(
            synth, text, tmp_path / "book.wav", "wav", SynthesisRequest(text=""), write_progress=write_progress
        )
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    book_bytes = 4 * round(seconds * SAMPLE_RATE)  # the whole book as float32
    assert len(peaks) == 1 and peaks[0] < book_bytes / 2, (peaks, book_bytes)
    audio, _ = decode_audio(tmp_path / "book.wav")
    assert len(audio) == round(seconds * SAMPLE_RATE)


def test_a_failed_write_keeps_the_parts_and_the_next_run_only_writes(
    synth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rtvox.runtime.offline.SEGMENT_CHARS", SEGMENT_CHARS)
    text = "\n".join([LINE] * 3)
    out = tmp_path / "book.flac"
    out.write_bytes(b"an older book")
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:  # the parts are saved; the output's commit fails
        if Path(dst).name == out.name:
            raise OSError("disk full")
        real_replace(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="disk full"):
            speak_document(synth, text, out, "flac", SynthesisRequest(text=""))
    assert os.replace is real_replace
    assert out.read_bytes() == b"an older book"  # untouched, and no temp file beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.flac", "book.flac" + PARTS_SUFFIX]
    assert len(list((tmp_path / ("book.flac" + PARTS_SUFFIX)).glob("segment-*.npy"))) == 3

    def no_step(jobs: list) -> list:  # type: ignore[type-arg]
        raise AssertionError("every segment was saved: nothing to synthesize again")

    monkeypatch.setattr(synth, "run_step", no_step)
    seen: list[tuple[int, int]] = []
    seconds = speak_document(
        synth, text, out, "flac", SynthesisRequest(text=""), progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(3, 3)]
    audio, _ = decode_audio(out)
    assert len(audio) == round(seconds * SAMPLE_RATE) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.flac"]
