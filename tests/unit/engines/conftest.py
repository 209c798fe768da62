"""Engine test fixtures: one tiny random model directory and one engine cache per session (compiling is the
slow part; every test of a backend shares its engines)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rtvox.engines.base import BuildOptions
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle, make_random_bundle
from rtvox.text import Vocabulary

CPU = torch.device("cpu")


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    vocab = Vocabulary.default().to_dict()  # the real phoneme set: bench tests run the text frontend
    b = make_random_bundle(tmp_path_factory.mktemp("model") / "tiny", preset="tiny", vocab=vocab, seed=0)
    with torch.no_grad():
        # A random duration head predicts ~0 frames (all ones); this spreads durations like a trained model.
        b.acoustic.variance.duration.head.bias.fill_(1.3)
    return b


@pytest.fixture(scope="session")
def engine_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("engine-cache")


@pytest.fixture(scope="session")
def ci_options(engine_cache: Path) -> BuildOptions:
    return BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=engine_cache, model_hash="test-tiny", warmup=False)
