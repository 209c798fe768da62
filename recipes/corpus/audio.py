"""Audio helpers for the corpus builder: the sample rate, resampling, atomic wav I/O, speech stats.

The sample rate is read from ``src/rtvox/constants.py`` by path, so it is defined once for the whole project
without importing the ``rtvox`` package (which needs torch, absent from the teacher environment).
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

_CONSTANTS_PATH = Path(__file__).resolve().parents[2] / "src" / "rtvox" / "constants.py"


def _load_constants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_rtvox_constants", _CONSTANTS_PATH)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot read {_CONSTANTS_PATH}; run the builder from an rtvox checkout")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_constants = _load_constants()
SAMPLE_RATE: int = _constants.SAMPLE_RATE
EMOTIONS: tuple[str, ...] = _constants.EMOTIONS

# Speech RMS (dBFS) every utterance is brought to before its emotion's energy offset is applied.
TARGET_RMS_DBFS = -21.0
PEAK_LIMIT = 0.97


def resample(audio: np.ndarray, src_rate: int, dst_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling of mono float audio (exact rational ratio, e.g. 22050 -> 24000 is 160/147)."""
    if src_rate == dst_rate:
        return audio.astype(np.float32, copy=False)
    ratio = Fraction(dst_rate, src_rate)
    return resample_poly(audio, ratio.numerator, ratio.denominator).astype(np.float32)


def trim_silence(audio: np.ndarray, rate: int = SAMPLE_RATE, threshold_db: float = -45.0) -> np.ndarray:
    """Cut leading/trailing frames (10 ms) quieter than ``threshold_db`` below the loudest frame."""
    frame = rate // 100
    n = len(audio) // frame
    if n == 0:
        return audio
    frames = audio[: n * frame].reshape(n, frame).astype(np.float64)
    rms_db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(rms_db > rms_db.max() + threshold_db)
    if len(loud) == 0:
        return audio[:0]
    start = max(0, (loud[0] - 1) * frame)
    end = min(len(audio), (loud[-1] + 2) * frame)
    return audio[start:end]


def normalize(audio: np.ndarray, gain_db: float = 0.0) -> np.ndarray:
    """Scale to TARGET_RMS_DBFS (+ ``gain_db``), measured on the active part, then limit the peak."""
    frame = SAMPLE_RATE // 100
    n = len(audio) // frame
    if n == 0:
        return audio.astype(np.float32)
    frames = audio[: n * frame].reshape(n, frame).astype(np.float64)
    energy = np.mean(frames**2, axis=1)
    active = energy[energy > energy.max() * 1e-3]
    rms = math.sqrt(float(np.mean(active))) if len(active) else 0.0
    if rms <= 0.0:
        return audio.astype(np.float32)
    out = audio * (10 ** ((TARGET_RMS_DBFS + gain_db) / 20) / rms)
    peak = float(np.max(np.abs(out)))
    if peak > PEAK_LIMIT:
        out = out * (PEAK_LIMIT / peak)
    return out.astype(np.float32)


def write_wav_atomic(path: Path, audio: np.ndarray, rate: int = SAMPLE_RATE) -> None:
    """Write 16-bit PCM mono; the file appears under its final name only when complete (rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype(np.int16)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".wav", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            sf.write(fh, pcm, rate, subtype="PCM_16", format="WAV")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    audio, rate = sf.read(str(path), dtype="float32", always_2d=False)
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    return audio, rate


@dataclass(frozen=True)
class SpeechStats:
    """Cheap evidence that a clip is speech: not silence (rms), not noise (voicing, F0 range)."""

    duration_s: float
    rms_dbfs: float
    voiced_ratio: float  # share of 5 ms frames with an F0 estimate
    f0_median_hz: float  # 0 when nothing is voiced
    f0_p5_hz: float
    f0_p95_hz: float

    def looks_like_speech(self) -> bool:
        return (
            self.duration_s > 0.3
            and self.rms_dbfs > -45.0
            # DIO under-reports voicing on WORLD resyntheses of Piper (Harvest: 0.48 voiced, DIO: 0.25),
            # hence the low bound.
            and 0.1 < self.voiced_ratio < 0.95
            and 50.0 < self.f0_median_hz < 500.0
        )


def speech_stats(audio: np.ndarray, rate: int = SAMPLE_RATE) -> SpeechStats:
    import pyworld

    x = audio.astype(np.float64)
    rms = math.sqrt(float(np.mean(x**2))) if len(x) else 0.0
    f0, _ = pyworld.dio(x, rate, frame_period=5.0)
    voiced = f0[f0 > 0]
    if len(voiced) == 0:
        return SpeechStats(len(x) / rate, 20 * math.log10(rms + 1e-12), 0.0, 0.0, 0.0, 0.0)
    p5, p50, p95 = np.percentile(voiced, [5, 50, 95])
    return SpeechStats(
        duration_s=len(x) / rate,
        rms_dbfs=20 * math.log10(rms + 1e-12),
        voiced_ratio=len(voiced) / len(f0),
        f0_median_hz=float(p50),
        f0_p5_hz=float(p5),
        f0_p95_hz=float(p95),
    )
