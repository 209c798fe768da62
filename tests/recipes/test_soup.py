"""recipes/train/soup.py: the weighted mean of two snapshots, tensor by tensor, and clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from recipes.train.soup import soup
from safetensors.torch import load_file, save_file


def _snap(directory: Path, scale: float, step: int) -> None:
    directory.mkdir(parents=True)
    save_file(
        {"w": torch.full((2, 3), scale, dtype=torch.float16), "n": torch.tensor([step])},
        str(directory / "m.safetensors"),
    )
    (directory / "progress.json").write_text(json.dumps({"step": step}), encoding="utf-8")


def test_soup_is_the_weighted_mean_of_floating_tensors(tmp_path: Path) -> None:
    _snap(tmp_path / "a", 1.0, 10)
    _snap(tmp_path / "b", 3.0, 20)
    assert soup(tmp_path / "a", tmp_path / "b", tmp_path / "o", 0.25) == ["m.safetensors"]
    out = load_file(tmp_path / "o" / "m.safetensors")
    assert out["w"].dtype == torch.float16 and torch.allclose(out["w"].float(), torch.full((2, 3), 1.5))
    assert out["n"].tolist() == [20]  # integer tensors are B's
    progress = json.loads((tmp_path / "o" / "progress.json").read_text(encoding="utf-8"))
    assert progress["step"] == 20 and progress["soup"]["weight_of_b"] == 0.25


def test_soup_refuses_mismatched_snapshots(tmp_path: Path) -> None:
    _snap(tmp_path / "a", 1.0, 10)
    (tmp_path / "b").mkdir()
    save_file({"w": torch.zeros(3, 2, dtype=torch.float16)}, str(tmp_path / "b" / "m.safetensors"))
    with pytest.raises(ValueError, match=r"m\.safetensors"):
        soup(tmp_path / "a", tmp_path / "b", tmp_path / "o")
    with pytest.raises(ValueError, match="weight"):
        soup(tmp_path / "a", tmp_path / "a", tmp_path / "o", 1.5)
