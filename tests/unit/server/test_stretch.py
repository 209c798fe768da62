"""Speeds outside the model's range: model speed + WSOLA time-stretch, pitch kept, exact lengths."""

from __future__ import annotations

import numpy as np
import pytest

from rtvox.constants import SAMPLE_RATE, SPEED_MAX, SPEED_MIN
from rtvox.server.stretch import plan_speed, time_stretch


@pytest.mark.parametrize(
    ("speed", "model", "stretch"),
    [(1.0, 1.0, 1.0), (0.25, 0.5, 0.5), (4.0, 2.0, 2.0), (3.0, 2.0, 1.5), (0.6, 0.6, 1.0)],
)
def test_plan_speed(speed: float, model: float, stretch: float) -> None:
    plan = plan_speed(speed)
    assert SPEED_MIN <= plan.model_speed <= SPEED_MAX
    assert plan.model_speed == pytest.approx(model)
    assert plan.stretch == pytest.approx(stretch)
    assert plan.total == pytest.approx(speed)


def _dominant_hz(wav: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(wav * np.hanning(len(wav))))
    return float(np.argmax(spectrum) * SAMPLE_RATE / len(wav))


@pytest.mark.parametrize("rate", [0.5, 0.8, 1.5, 2.0])
def test_time_stretch_keeps_pitch_and_sets_length(rate: float) -> None:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    tone = (0.5 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)
    out = time_stretch(tone, rate)
    assert len(out) == round(len(tone) / rate)
    assert out.dtype == np.float32
    inner = out[len(out) // 8 : -len(out) // 8]
    assert _dominant_hz(inner) == pytest.approx(220.0, abs=6.0)
    assert np.max(np.abs(inner)) == pytest.approx(0.5, abs=0.05)  # no holes, no doubled overlap


def test_time_stretch_identity_and_edge_cases() -> None:
    x = np.random.default_rng(0).uniform(-0.5, 0.5, 5000).astype(np.float32)
    np.testing.assert_array_equal(time_stretch(x, 1.0), x)
    assert len(time_stretch(np.zeros(0, np.float32), 2.0)) == 0
    short = time_stretch(x[:500], 2.0)
    assert len(short) == 250
