"""Runtime fixtures: one tiny random model directory per session, with durations that vary from phoneme to phoneme."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.runtime import Synthesizer


@pytest.fixture(scope="session")
def runtime_model(make_tiny_model: Callable[[str], Path]) -> Path:
    return make_tiny_model("runtime-models")


def vary_durations(synth: Synthesizer) -> Synthesizer:
    """A random model predicts ~0 frames (all ones after rounding); a bias of 1.3 gives ~2.7 frames and spread,
    so rows of a batch really differ in length and padding is exercised."""
    with torch.no_grad():
        synth.bundle.acoustic.variance.duration.head.bias.fill_(1.3)
    return synth


@pytest.fixture
def rsynth(runtime_model: Path) -> Synthesizer:
    return vary_durations(Synthesizer(runtime_model, device="cpu"))


def assert_audio_close(got: np.ndarray, want: np.ndarray, rel: float = 1e-4) -> None:
    """Same length, and equal up to float rounding relative to the reference's peak (random models are quiet)."""
    assert got.shape == want.shape
    peak = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    assert float(np.max(np.abs(got - want))) <= rel * peak if want.size else True
