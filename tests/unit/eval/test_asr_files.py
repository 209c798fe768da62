"""Reassembly of the Whisper model folder from the two part packages (with stand-in part files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtvox.errors import ModelError
from rtvox.eval import asr


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    src = tmp_path / "site"
    src.mkdir()
    files = {
        "model.bin.part1": b"A" * 1000,
        "model.bin.part2": b"B" * 777,
        "config.json": b"{}",
        "tokenizer.json": b"{}",
        "vocabulary.txt": b"x\n",
    }
    for name, data in files.items():
        (src / name).write_bytes(data)

    def installed(package: str, name: str) -> Path:
        assert package in asr.PART_PACKAGES
        return src / name

    monkeypatch.setattr(asr, "_installed_file", installed)
    return src


def test_model_bin_is_the_two_parts_in_order(parts: Path, tmp_path: Path) -> None:
    folder = asr.whisper_model_dir(tmp_path / "cache")
    assert (folder / "model.bin").read_bytes() == b"A" * 1000 + b"B" * 777
    assert {p.name for p in folder.iterdir()} == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}


def test_reassembly_happens_once_and_repairs_a_truncated_file(parts: Path, tmp_path: Path) -> None:
    folder = asr.whisper_model_dir(tmp_path / "cache")
    stamp = (folder / "model.bin").stat().st_mtime_ns
    asr.whisper_model_dir(tmp_path / "cache")
    assert (folder / "model.bin").stat().st_mtime_ns == stamp
    (folder / "model.bin").write_bytes(b"A" * 10)  # an interrupted copy from some other tool
    asr.whisper_model_dir(tmp_path / "cache")
    assert (folder / "model.bin").stat().st_size == 1777
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(asr.CACHE_ENV, str(tmp_path / "c"))
    assert asr.cache_dir() == tmp_path / "c"
    monkeypatch.delenv(asr.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert asr.cache_dir() == tmp_path / "x" / "rtvox"


def test_missing_package_names_the_extra() -> None:
    with pytest.raises(ModelError, match=r"\.\[eval\]"):
        asr._installed_file("rtvox-no-such-whisper-part", "model.bin.part1")


def test_installed_parts_are_found_when_the_extra_is_present() -> None:
    if not asr.whisper_available():
        pytest.skip("eval extra not installed")
    path = asr._installed_file(asr.PART_PACKAGES[1], "model.bin.part2")
    assert path.is_file() and path.stat().st_size > 1_000_000
