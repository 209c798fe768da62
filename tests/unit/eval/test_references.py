"""Reference clips for the cloning test: any decodable format and rate, short or broken clips reported, and
folders that give nothing refused with a message that names the problem."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from rtvox.constants import SAMPLE_RATE
from rtvox.errors import InputError
from rtvox.eval.cloning import CLIP_MAX_S, folder_references, gather_references


def voiced(seconds: float, sr: int, f0: float = 150.0) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2
    return (0.3 * envelope * np.sin(2 * np.pi * f0 * t)).astype(np.float32)


def test_folder_takes_any_decodable_format_and_rate_and_reports_the_rest(tmp_path: Path) -> None:
    stereo = np.stack([voiced(7.0, 16000), voiced(7.0, 16000, 180.0)], axis=1)
    sf.write(tmp_path / "a_flac_16k_stereo.flac", stereo, 16000)
    sf.write(tmp_path / "b_long.wav", voiced(40.0, SAMPLE_RATE), SAMPLE_RATE)
    sf.write(tmp_path / "c_short.wav", voiced(2.0, SAMPLE_RATE), SAMPLE_RATE)
    (tmp_path / "d_broken.mp3").write_bytes(b"this is not audio" * 20)
    (tmp_path / "notes.txt").write_text("not a clip")
    skipped: list[dict[str, str]] = []
    refs = folder_references(tmp_path, skipped)
    assert [r.name for r in refs] == ["a_flac_16k_stereo", "b_long"]
    assert abs(refs[0].audio.shape[0] / SAMPLE_RATE - 7.0) < 0.1  # resampled to the model rate
    assert refs[1].audio.shape[0] == int(CLIP_MAX_S * SAMPLE_RATE)  # cut to the clip limit
    reasons = {Path(s["file"]).name: s["reason"] for s in skipped}
    assert set(reasons) == {"c_short.wav", "d_broken.mp3"}
    assert "under 5 s" in reasons["c_short.wav"]
    assert "could not decode" in reasons["d_broken.mp3"]


def test_gather_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--clone-refs .*missing.* is not a folder"):
        gather_references(None, [tmp_path / "missing"])


def test_gather_refuses_folders_without_usable_clips_and_says_why(tmp_path: Path) -> None:
    sf.write(tmp_path / "short.wav", voiced(1.5, SAMPLE_RATE), SAMPLE_RATE)
    with pytest.raises(InputError, match=r"no usable reference clip.*short\.wav: 1\.5 s of speech, under 5 s"):
        gather_references(None, [tmp_path])
