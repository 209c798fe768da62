"""Model test fixtures: tiny seeded models, request tensors, one tiny model directory per session."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from rtvox.constants import SPEAKER_EMBED_DIM
from rtvox.models.acoustic import AcousticConfig, AcousticModel
from rtvox.models.bundle import make_random_bundle
from rtvox.models.prosody import IDENTITY_ROW

VOCAB_SIZE = 40
TINY_COND_DIM = AcousticConfig.preset("tiny", vocab_size=VOCAB_SIZE).cond_dim
Request = tuple[torch.Tensor, ...]


def tiny_acoustic(seed: int = 0) -> AcousticModel:
    """A tiny random acoustic model whose durations vary (a random one predicts ~0 frames, i.e. all ones)."""
    torch.manual_seed(seed)
    model = AcousticModel(AcousticConfig.preset("tiny", vocab_size=VOCAB_SIZE)).eval()
    with torch.no_grad():
        model.variance.duration.head.bias.fill_(1.3)  # expm1(1.3) ≈ 2.7 frames, plus the random spread
    return model


def make_request(
    lengths: list[int],
    *,
    seed: int = 0,
    targets: list[int] | None = None,
    speed: float = 1.0,
    prosody: tuple[float, float, float, float] = IDENTITY_ROW,
) -> Request:
    """(phonemes, mask, cond, speed, target_frames, pitch_scale, energy_scale, prosody) for rows of these
    lengths."""
    g = torch.Generator().manual_seed(seed)
    b, n = len(lengths), max(lengths)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    phonemes = torch.randint(1, VOCAB_SIZE, (b, n), generator=g).masked_fill(~mask, 0)
    cond = torch.randn(b, TINY_COND_DIM, generator=g)
    cond[:, :SPEAKER_EMBED_DIM] = torch.nn.functional.normalize(cond[:, :SPEAKER_EMBED_DIM].abs(), dim=-1)
    target = torch.tensor(targets if targets is not None else [0] * b, dtype=torch.long)
    ones = torch.ones(b)
    return phonemes, mask, cond, ones * speed, target, ones.clone(), ones.clone(), torch.tensor([prosody] * b)


def row(request: Request, i: int, length: int) -> Request:
    """Row i of a batched request, cut to its real length (what a batch of one would hold)."""
    phonemes, mask, cond, speed, target, pitch, energy, prosody = request
    return (
        phonemes[i : i + 1, :length],
        mask[i : i + 1, :length],
        cond[i : i + 1],
        speed[i : i + 1],
        target[i : i + 1],
        pitch[i : i + 1],
        energy[i : i + 1],
        prosody[i : i + 1],
    )


@pytest.fixture
def acoustic() -> AcousticModel:
    return tiny_acoustic()


@pytest.fixture(scope="session")
def tiny_bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "rtvox-tiny"
    make_random_bundle(path, "tiny", vocab={"symbols": [f"s{i}" for i in range(VOCAB_SIZE)]}, seed=1)
    return path


@pytest.fixture
def bundle_copy(tiny_bundle_dir: Path, tmp_path: Path) -> Callable[[], Path]:
    """Returns a function making a fresh, writable copy of the tiny model directory."""

    def copy() -> Path:
        dest = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(tiny_bundle_dir, dest)
        return dest

    return copy
