"""Suite-wide fixtures: no test may touch the user's real voice store; a writer of tiny random-weight models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rtvox.models.bundle import make_random_bundle
from rtvox.text import Vocabulary


@pytest.fixture(autouse=True)
def _isolated_voice_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    voices = tmp_path / "voices"
    monkeypatch.setenv("RTVOX_VOICES_DIR", str(voices))
    return voices


@pytest.fixture(scope="session")
def make_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`make(name)` writes a random-weight tiny model directory (seed 0; voices anna: zh female, ben: en male)
    under a fresh temporary folder named `name` and returns its path: each caller gets its own copy."""

    def make(name: str) -> Path:
        path = tmp_path_factory.mktemp(name) / "tiny"
        voices = {"anna": {"gender": "female", "language": "zh"}, "ben": {"gender": "male", "language": "en"}}
        make_random_bundle(path, preset="tiny", vocab=Vocabulary.default().to_dict(), seed=0, voices=voices)
        return path

    return make
