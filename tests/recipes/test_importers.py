"""Importers on tiny fake LJSpeech and AISHELL-3 folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from recipes.corpus.importers import main, read_aishell3, read_ljspeech
from recipes.corpus.manifest import read_manifest


def _wav(path: Path, rate: int, seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(rate * seconds)) / rate
    sf.write(str(path), (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), rate, subtype="PCM_16")


def _ljspeech(root: Path) -> Path:
    _wav(root / "wavs" / "LJ001-0001.wav", 22050, 1.0)
    _wav(root / "wavs" / "LJ001-0002.wav", 22050, 0.5)
    (root / "metadata.csv").write_text(
        "LJ001-0001|Printing, in 1450, was new.|Printing, in fourteen fifty, was new.\n"
        "LJ001-0002|Dr. Smith left.|Doctor Smith left.\n",
        encoding="utf-8",
    )
    return root


def _aishell3(root: Path) -> Path:
    for split, names in (("train", ["SSB00050001", "SSB00050002"]), ("test", ["SSB06930001"])):
        lines = []
        for name in names:
            _wav(root / split / "wav" / name[:7] / f"{name}.wav", 44100, 0.8)
            lines.append(f"{name}.wav\t广 guang3 州 zhou1 女 nv3 大 da4 学 xue2")
        (root / split / "content.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_ljspeech(tmp_path: Path) -> None:
    root = _ljspeech(tmp_path / "LJSpeech-1.1")
    out = tmp_path / "out"
    out.mkdir()
    records = list(read_ljspeech(root, out))
    assert [r.id for r in records] == ["ljspeech-LJ001-0001", "ljspeech-LJ001-0002"]
    first = records[0]
    assert (first.text, first.spoken) == (
        "Printing, in 1450, was new.",
        "Printing, in fourteen fifty, was new.",
    )
    assert (first.lang, first.speaker, first.emotion, first.sample_rate) == (
        "en",
        "ljspeech",
        "neutral",
        22050,
    )
    assert first.duration_s == 1.0 and (out / first.path).resolve() == (root / "wavs" / "LJ001-0001.wav").resolve()
    assert {r.split for r in records} <= {"train", "val"}


def test_aishell3_with_conversion(tmp_path: Path) -> None:
    root = _aishell3(tmp_path / "aishell3")
    out = tmp_path / "out"
    assert main(["aishell3", str(root), "--out", str(out), "--convert"]) == 0
    records = list(read_manifest(out / "manifest.jsonl"))
    assert len(records) == 3
    by_id = {r.id: r for r in records}
    r = by_id["aishell3-SSB00050001"]
    assert (r.text, r.lang, r.speaker, r.split) == ("广州女大学", "zh", "aishell3_SSB0005", "train")
    assert r.phones == ["guang3 zhou1 nv3 da4 xue2"]
    assert by_id["aishell3-SSB06930001"].split == "val"
    info = sf.info(str(out / r.path))
    assert (info.samplerate, info.channels, info.subtype) == (24000, 1, "PCM_16")
    assert abs(r.duration_s - 0.8) < 0.01


def test_aishell3_single_split_folder(tmp_path: Path) -> None:
    root = _aishell3(tmp_path / "aishell3")
    records = list(read_aishell3(root / "test", tmp_path))
    assert [r.split for r in records] == ["val"] and records[0].sample_rate == 44100
