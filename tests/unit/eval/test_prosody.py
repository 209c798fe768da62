"""The emotion judge's features on synthetic signals whose prosody is known."""

from __future__ import annotations

import numpy as np
import pytest

from rtvox.audio.pitch import frame_f0
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.prosody import FEATURES, NeutralReference, ProsodyExtractor, relative, syllable_count

SECONDS = 2.0


def harmonic(f0: np.ndarray, amplitude: float = 0.3) -> np.ndarray:
    """A voice-like buzz: five harmonics following the per-sample F0 contour f0 [T] (Hz)."""
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    wav = sum(np.sin(k * phase) / k for k in range(1, 6))
    return (amplitude * wav / np.max(np.abs(wav))).astype(np.float32)


def contour(start_hz: float, end_hz: float, rise_from: float = 2 / 3) -> np.ndarray:
    """Flat at start_hz, then a glide to end_hz over the part of the clip after `rise_from`."""
    t = np.linspace(0, 1, int(SECONDS * SAMPLE_RATE))
    glide = np.clip((t - rise_from) / (1 - rise_from), 0, 1)
    return start_hz * (end_hz / start_hz) ** glide


@pytest.fixture(scope="module")
def extract() -> ProsodyExtractor:
    return ProsodyExtractor()


def feature(values: np.ndarray, name: str) -> float:
    return float(values[FEATURES.index(name)])


def test_frame_f0_finds_a_steady_pitch() -> None:
    wav = harmonic(np.full(SAMPLE_RATE, 180.0))
    f0 = frame_f0(wav, len(wav) // HOP_LENGTH)
    voiced = f0[10:-10]
    assert np.all(voiced > 0)
    assert np.median(voiced) == pytest.approx(180.0, rel=0.02)


def test_frame_f0_marks_silence_unvoiced() -> None:
    wav = np.concatenate([harmonic(np.full(SAMPLE_RATE // 2, 150.0)), np.zeros(SAMPLE_RATE // 2, np.float32)])
    f0 = frame_f0(wav, len(wav) // HOP_LENGTH)
    assert np.all(f0[-20:] == 0)
    assert np.all(f0[5:30] > 0)


def test_rising_final_pitch_gives_a_positive_final_slope(extract: ProsodyExtractor) -> None:
    rising = extract(harmonic(contour(150, 260)), SAMPLE_RATE, "are you sure")
    falling = extract(harmonic(contour(200, 120)), SAMPLE_RATE, "are you sure")
    flat = extract(harmonic(contour(150, 150)), SAMPLE_RATE, "are you sure")
    assert feature(rising, "final_slope") > 0.5
    assert feature(falling, "final_slope") < -0.5
    assert abs(feature(flat, "final_slope")) < 0.05


def test_pitch_level_range_and_energy(extract: ProsodyExtractor) -> None:
    low = extract(harmonic(np.full(int(SECONDS * SAMPLE_RATE), 120.0), 0.1), SAMPLE_RATE, "one two three")
    high = extract(harmonic(np.full(int(SECONDS * SAMPLE_RATE), 240.0), 0.2), SAMPLE_RATE, "one two three")
    assert feature(low, "lf0_mean") == pytest.approx(np.log(120), abs=0.03)
    assert feature(high, "lf0_mean") - feature(low, "lf0_mean") == pytest.approx(np.log(2), abs=0.05)
    assert feature(high, "energy_mean") - feature(low, "energy_mean") == pytest.approx(6.02, abs=0.5)
    assert feature(low, "lf0_std") < 0.02
    assert feature(low, "voiced_ratio") > 0.9


def test_speaking_rate_proxy_follows_syllables(extract: ProsodyExtractor) -> None:
    wav = harmonic(np.full(int(SECONDS * SAMPLE_RATE), 150.0))
    few = extract(wav, SAMPLE_RATE, "今天")
    many = extract(wav, SAMPLE_RATE, "今天天气很好")
    assert feature(few, "sec_per_syllable") - feature(many, "sec_per_syllable") == pytest.approx(np.log(3), abs=1e-6)


def test_syllable_count() -> None:
    assert syllable_count("我想要咖啡") == 5
    assert syllable_count("I would like coffee") == 6  # vowel groups: i, ou, i+e, o+ee (a proxy, not a dictionary)
    assert syllable_count("我有3个apple") == 6  # 我 有 三 个 + apple (a, e)
    assert syllable_count("") == 1


def test_relative_features_are_differences_and_log_ratios() -> None:
    reference = np.arange(1.0, len(FEATURES) + 1)
    clip = reference + 0.5
    out = relative(clip, reference)
    for i, name in enumerate(FEATURES):
        if name in ("lf0_std", "energy_std"):
            assert out[i] == pytest.approx(np.log(clip[i] / reference[i]))
        else:
            assert out[i] == pytest.approx(0.5)
    assert np.allclose(relative(reference, reference), 0)


def test_neutral_reference_needs_clips() -> None:
    ref = NeutralReference.from_features("a", np.ones((3, len(FEATURES))))
    assert ref.count == 3 and np.allclose(ref.mean, 1)
    with pytest.raises(ValueError, match="no neutral utterance"):
        NeutralReference.from_features("a", np.zeros((0, len(FEATURES))))


def test_too_short_clip_is_refused(extract: ProsodyExtractor) -> None:
    with pytest.raises(ValueError, match="too short"):
        extract(harmonic(np.full(1000, 150.0)), SAMPLE_RATE, "a")
