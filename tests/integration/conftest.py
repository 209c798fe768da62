"""A tiny random-weight model directory with the real vocabulary, shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtvox.models.bundle import make_random_bundle
from rtvox.runtime import Synthesizer
from rtvox.text import Vocabulary


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny"
    voices = {"anna": {"gender": "female", "language": "zh"}, "ben": {"gender": "male", "language": "en"}}
    make_random_bundle(path, preset="tiny", vocab=Vocabulary.default().to_dict(), seed=0, voices=voices)
    return path


@pytest.fixture
def synth(tiny_model: Path) -> Synthesizer:
    return Synthesizer(tiny_model, device="cpu")
