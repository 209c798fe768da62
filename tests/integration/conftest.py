"""A tiny random-weight model directory with the real vocabulary, shared by the integration tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rtvox.runtime import Synthesizer


@pytest.fixture(scope="session")
def tiny_model(make_tiny_model: Callable[[str], Path]) -> Path:
    return make_tiny_model("models")


@pytest.fixture
def synth(tiny_model: Path) -> Synthesizer:
    return Synthesizer(tiny_model, device="cpu")
