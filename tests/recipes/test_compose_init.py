"""recipes/train/compose_init.py: the shipped model's weights and another run's aligner in one snapshot that the
trainer's strict loader accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from recipes.train.compose_init import compose

from rtvox.errors import ModelError
from rtvox.models.bundle import load_weights
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import AcousticRun, build_modules, run_config
from rtvox.training.align import Aligner
from rtvox.training.checkpoint import load_snapshot, save_snapshot

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "rtvox-small"


def _aligner_snapshot(directory: Path, n_mels: int = 80) -> Aligner:
    torch.manual_seed(3)
    aligner = Aligner(len(Vocabulary.default()), n_mels)
    save_snapshot(directory, {"aligner": aligner}, {"step": 123})
    return aligner


def test_compose_keeps_the_model_and_the_aligner(tmp_path: Path) -> None:
    aligner = _aligner_snapshot(tmp_path / "run")
    progress = compose(MODEL, tmp_path / "run", 25291, tmp_path / "init")
    assert progress["step"] == 25291 and progress["frame_position"] is True
    assert progress["init_model"].startswith("rtvox-small ")

    vocab = Vocabulary.default()
    run = AcousticRun(data=tmp_path, run_dir=tmp_path, init=MODEL, frame_position=True)  # the model's decoder shape
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    loaded = load_snapshot(tmp_path / "init", modules)  # strict: every module present, nothing extra
    assert loaded["step"] == 25291

    shipped = load_weights(MODEL, "acoustic", torch.device("cpu"), torch.float32)
    state = modules["acoustic"].state_dict()
    assert shipped.keys() == state.keys()
    assert all(torch.equal(shipped[k], state[k]) for k in shipped)
    fresh = {k: v.half().float() for k, v in aligner.state_dict().items()}  # snapshots hold fp16
    got = modules["aligner"].state_dict()
    assert all(torch.equal(fresh[k], got[k]) for k in fresh)
    emotion = load_weights(MODEL, "emotion", torch.device("cpu"), torch.float32)
    assert torch.equal(emotion["table.embeddings.weight"], modules["emotion_table"].state_dict()["embeddings.weight"])


def test_compose_rejects_a_bad_step_and_a_mismatched_aligner(tmp_path: Path) -> None:
    _aligner_snapshot(tmp_path / "run")
    with pytest.raises(ValueError, match="--step"):
        compose(MODEL, tmp_path / "run", -1, tmp_path / "init")
    _aligner_snapshot(tmp_path / "other", n_mels=40)
    with pytest.raises(ModelError, match="aligner"):
        compose(MODEL, tmp_path / "other", 0, tmp_path / "init2")
    assert not (tmp_path / "init2").exists()
