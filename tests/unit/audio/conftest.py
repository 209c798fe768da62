"""Helpers for the audio tests: deterministic speech-like signals, in-memory files, codec-aware compare."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest
import soundfile as sf


def speech_like(sr: int, seconds: float, *, level: float = 0.3, seed: int = 0) -> np.ndarray:
    """Voiced 'syllables': a harmonic tone with drifting pitch, 4 Hz on/off envelope and a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(sr * seconds)) / sr
    f0 = 140.0 + 30.0 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 12) if k * 170.0 < sr / 2)
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t)
    wav = harmonics * envelope + 0.02 * rng.standard_normal(t.shape[0])
    return (level * wav / np.max(np.abs(wav))).astype(np.float32)


def wav_bytes(wav: np.ndarray, sr: int, subtype: str = "PCM_16", fmt: str = "WAV") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, wav, sr, format=fmt, subtype=subtype)
    return buffer.getvalue()


def best_lag(reference: np.ndarray, other: np.ndarray, max_lag: int) -> int:
    """Lag (samples) by which `other` trails `reference`, by cross-correlation over [0, max_lag]."""
    n = min(reference.shape[0], other.shape[0] - max_lag)
    scores = [float(np.dot(reference[:n], other[lag : lag + n])) for lag in range(max_lag + 1)]
    return int(np.argmax(scores))


def aligned_correlation(reference: np.ndarray, decoded: np.ndarray, max_lag: int = 3000) -> float:
    """Pearson correlation of `decoded` with `reference` after removing codec delay."""
    decoded = np.pad(decoded, (0, max(0, reference.shape[0] + max_lag - decoded.shape[0])))
    lag = best_lag(reference, decoded, max_lag)
    return float(np.corrcoef(reference, decoded[lag : lag + reference.shape[0]])[0, 1])


# Test modules cannot import each other (pytest runs with --import-mode=importlib): helpers come as fixtures.
SpeechFn = Callable[..., np.ndarray]
WavBytesFn = Callable[..., bytes]
CorrelateFn = Callable[..., float]


@pytest.fixture
def speech() -> SpeechFn:
    return speech_like


@pytest.fixture
def to_wav() -> WavBytesFn:
    return wav_bytes


@pytest.fixture
def correlate() -> CorrelateFn:
    return aligned_correlation
