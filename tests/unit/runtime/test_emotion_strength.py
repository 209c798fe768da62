"""config.json `emotion_strength`: a label request at emotion_alpha a is conditioned at a × the label's strength."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from rtvox.cli import app
from rtvox.constants import SAMPLE_RATE
from rtvox.errors import ModelError
from rtvox.models.bundle import ModelBundle, ModelConfig
from rtvox.models.prosody import EmotionProsody
from rtvox.runtime import Synthesizer
from rtvox.runtime.types import SynthesisRequest
from rtvox.training.prosody_prior import update_config

TEXT = "Hello there."
PRIOR = EmotionProsody.from_dict(
    {"angry": {"pitch_shift": 0.2, "pitch_range": 1.2, "energy_shift": 0.1, "duration": 0.9, "tilt": 0.3}}
)


@pytest.fixture
def models(runtime_model: Path, tmp_path: Path) -> tuple[Synthesizer, Synthesizer]:
    """(the tiny model with an angry prior, the same with angry's strength 1.6)."""
    plain, strong = tmp_path / "plain", tmp_path / "strong"
    shutil.copytree(runtime_model, plain)
    update_config(plain, lambda c: dataclasses.replace(c, emotion_prosody=PRIOR))
    shutil.copytree(plain, strong)
    update_config(strong, lambda c: dataclasses.replace(c, emotion_strength={"angry": 1.6}))
    return Synthesizer(plain, device="cpu"), Synthesizer(strong, device="cpu")


def conditioning(synth: Synthesizer, **kwargs: object) -> tuple[torch.Tensor, tuple[float, ...], float]:
    prepared = synth.prepare(SynthesisRequest(text=TEXT, **kwargs))  # type: ignore[arg-type]
    return prepared.cond, tuple(prepared.prosody), prepared.tilt


@pytest.mark.parametrize(("alpha", "effective"), [(1.0, 1.6), (0.5, 0.8), (0.0, 0.0)])
def test_a_label_is_conditioned_at_alpha_times_its_strength(
    models: tuple[Synthesizer, Synthesizer], alpha: float, effective: float
) -> None:
    plain, strong = models
    cond, prosody, tilt = conditioning(strong, emotion="angry", emotion_alpha=alpha)
    want_cond, want_prosody, want_tilt = conditioning(plain, emotion="angry", emotion_alpha=effective)
    torch.testing.assert_close(cond, want_cond)
    assert prosody == pytest.approx(want_prosody) and tilt == pytest.approx(want_tilt)
    if effective:
        assert not torch.allclose(cond, conditioning(plain, emotion="angry", emotion_alpha=alpha)[0])


def test_other_labels_and_emotion_clips_are_untouched(models: tuple[Synthesizer, Synthesizer]) -> None:
    plain, strong = models
    for kwargs in ({}, {"emotion": "neutral"}, {"emotion": "happy", "emotion_alpha": 1.5}):
        torch.testing.assert_close(conditioning(strong, **kwargs)[0], conditioning(plain, **kwargs)[0])
    clip = (0.1 * np.sin(np.arange(SAMPLE_RATE) * 2 * np.pi * 200 / SAMPLE_RATE)).astype(np.float32)
    torch.testing.assert_close(
        conditioning(strong, emotion="angry", emotion_ref=clip)[0],
        conditioning(plain, emotion="angry", emotion_ref=clip)[0],
    )


def test_config_round_trip_and_validation(runtime_model: Path, tmp_path: Path) -> None:
    config = ModelConfig.from_dict(json.loads((runtime_model / "config.json").read_text("utf-8")))
    assert "emotion_strength" not in config.to_dict()  # absent stays absent: the model hash does not move
    strong = dataclasses.replace(config, emotion_strength={"surprised": 1.3, "angry": 1.6})
    assert ModelConfig.from_dict(json.loads(json.dumps(strong.to_dict()))) == strong
    assert strong.label_alpha("angry", 0.5) == pytest.approx(0.8) and strong.label_alpha("sad", 0.5) == 0.5
    for bad, message in (
        ({"angry": 3.0}, "outside"),
        ({"angry": "loud"}, "numbers"),
        ({"bored": 1.2}, "'bored'"),
        ({"neutral": 1.2}, "other than neutral"),
        (["angry"], "emotion_strength must be an object"),
    ):
        path = tmp_path / f"bad-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(runtime_model, path)
        data = json.loads((path / "config.json").read_text("utf-8"))
        data["emotion_strength"] = bad
        (path / "config.json").write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(ModelError, match=message):
            ModelBundle.load(path)


def test_the_train_command_writes_and_clears_strengths(runtime_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    shutil.copytree(runtime_model, model)
    runner = CliRunner()
    result = runner.invoke(app, ["train", "emotion-strength", "--model", str(model), "angry=1.6", "surprised=1.3"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["train", "emotion-strength", "--model", str(model), "surprised=1"])
    assert result.exit_code == 0, result.output
    assert json.loads((model / "config.json").read_text("utf-8"))["emotion_strength"] == {"angry": 1.6}
    for bad, named in (
        ("bored=1.2", "unknown emotion 'bored'"),
        ("angry=9", "'angry=9': give EMOTION=STRENGTH with STRENGTH from 0.25 to 2.0"),
        ("angry", "'angry': give EMOTION=STRENGTH"),
    ):
        result = runner.invoke(app, ["train", "emotion-strength", "--model", str(model), bad])
        flat = " ".join(result.output.replace("│", " ").split())  # the usage box wraps long messages
        assert result.exit_code == 2 and named in flat, result.output
    assert json.loads((model / "config.json").read_text("utf-8"))["emotion_strength"] == {"angry": 1.6}


def test_train_commands_refuse_unknown_languages_and_devices(runtime_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    shutil.copytree(runtime_model, model)
    runner = CliRunner()
    before = (model / "config.json").read_text("utf-8")
    result = runner.invoke(app, ["train", "language-rate", "--model", str(model), "klingon=1.1"])
    assert result.exit_code == 2 and "unknown language 'klingon'" in " ".join(result.output.replace("│", " ").split())
    assert (model / "config.json").read_text("utf-8") == before  # nothing written
    args = ["train", "acoustic", "--data", str(tmp_path), "--run-dir", str(tmp_path / "run"), "--device", "tpu"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "unknown device 'tpu'" in " ".join(result.output.replace("│", " ").split())
    assert runner.invoke(app, ["bench", "--device", "mps"]).exit_code == 2  # the engine commands: one line, exit 2
