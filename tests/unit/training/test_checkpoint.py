"""Weight snapshots: a run that adds a layer starts from a snapshot without it; nothing else may be missing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rtvox.errors import ModelError
from rtvox.models.acoustic import AcousticConfig, AcousticModel
from rtvox.training.acoustic import NEW_LAYERS
from rtvox.training.checkpoint import load_snapshot, save_snapshot


def test_a_snapshot_without_the_frame_position_layer_starts_a_run_that_adds_it(tmp_path: Path) -> None:
    base = AcousticConfig.preset("tiny", vocab_size=40)
    plain = AcousticModel(base)
    save_snapshot(tmp_path, {"acoustic": plain}, {"step": 7})
    positioned = AcousticModel(AcousticConfig(**{**base.to_dict(), "frame_position": True}))
    assert load_snapshot(tmp_path, {"acoustic": positioned}, new_layers=NEW_LAYERS) == {"step": 7}
    assert positioned.frame_pos is not None and not positioned.frame_pos.weight.any()
    torch.testing.assert_close(positioned.embed.weight, plain.embed.weight.half().float())
    with pytest.raises(ModelError, match="frame_pos"):
        load_snapshot(
            tmp_path, {"acoustic": AcousticModel(AcousticConfig(**{**base.to_dict(), "frame_position": True}))}
        )
    save_snapshot(tmp_path / "b", {"acoustic": positioned}, {})
    with pytest.raises(ModelError, match="unexpected"):  # a layer the model does not have is an error
        load_snapshot(tmp_path / "b", {"acoustic": AcousticModel(base)}, new_layers=NEW_LAYERS)
