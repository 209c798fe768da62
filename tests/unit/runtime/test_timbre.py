"""Timbre matching of clones (rtvox.runtime.timbre): the offset's arithmetic, its checks, the config knob, and the
offset reaching the audio on the library path (clone by name, speaker profile) and persisting with the clone."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.errors import InputError, ModelError
from rtvox.models.bundle import ModelBundle, ModelConfig
from rtvox.models.prosody import tilt_ramp
from rtvox.runtime import Synthesizer
from rtvox.runtime.timbre import CALIBRATION, TIMBRE_CLIP, offset_row, timbre_offset
from rtvox.runtime.types import SynthesisRequest, Voice
from rtvox.runtime.voices import VoiceStore
from rtvox.training.prosody_prior import update_config

DATA = Path(__file__).resolve().parents[2] / "data"
MALE_CLIP = DATA / "speech_en_male_16k.wav"
FEMALE_CLIP = DATA / "speech_en_female_16k.wav"
TEXT = "The lamp on the desk is new."


def test_offset_is_the_clipped_level_free_gap_times_the_strength() -> None:
    reference = np.linspace(-2.0, 2.0, 80)
    rendered = [np.zeros(80), np.full(80, 0.4)]  # their mean (0.2 everywhere) is a level: removed with the mean
    got = timbre_offset(reference + 5.0, rendered, 0.5)
    gap = np.clip(reference - reference.mean(), -TIMBRE_CLIP, TIMBRE_CLIP)
    np.testing.assert_allclose(got, 0.5 * gap, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == (80,)
    assert float(np.abs(got).max()) == pytest.approx(0.5 * TIMBRE_CLIP)
    with pytest.raises(ValueError, match="at least one rendering"):
        timbre_offset(reference, [], 0.5)


def test_offset_row_is_the_tilt_along_its_ramp_plus_the_timbre() -> None:
    ramp = tilt_ramp(80, torch.device("cpu")).numpy()
    np.testing.assert_allclose(offset_row(0.7, None), 0.7 * ramp, atol=1e-6)
    timbre = np.linspace(-0.3, 0.3, 80, dtype=np.float32)
    np.testing.assert_allclose(offset_row(-0.2, timbre), -0.2 * ramp + timbre, atol=1e-6)
    assert not offset_row(0.0, None).any()


@pytest.mark.parametrize("bad", [np.zeros(79), np.full(80, np.nan), np.full(80, 3.5), "loud", [[0.0] * 80, [0.0] * 80]])
def test_a_bad_timbre_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(InputError, match="speaker_timbre must be 80 finite numbers") as info:
        SynthesisRequest(text="Hi.", speaker_timbre=bad)  # type: ignore[arg-type]
    assert info.value.param == "speaker_timbre"
    with pytest.raises(InputError, match="bad spectrum"):
        Voice(name="x", embedding=np.ones(256, np.float32), spectrum=np.zeros(12))


@pytest.mark.parametrize("value", [-0.1, 2.5, True, "0.5"])
def test_the_config_knob_is_checked(value: object) -> None:
    config = ModelConfig.preset("tiny", vocab_size=64)
    data = config.to_dict()
    assert "timbre_match" not in data  # off writes no key: model_hash as before the field existed
    with pytest.raises(ModelError, match="timbre_match"):
        ModelConfig.from_dict(data | {"timbre_match": value})
    assert ModelConfig.from_dict(data | {"timbre_match": 0.5}).to_dict()["timbre_match"] == 0.5


@pytest.fixture
def matching(runtime_model: Path, tmp_path: Path) -> Synthesizer:
    """The tiny model with timbre matching at strength 0.5."""
    path = tmp_path / "matching"
    shutil.copytree(runtime_model, path)
    update_config(path, lambda c: dataclasses.replace(c, timbre_match=0.5))
    return Synthesizer(path, device="cpu")


def test_a_model_without_matching_gives_no_timbre(rsynth: Synthesizer) -> None:
    profile = rsynth.speaker_profile(MALE_CLIP)
    assert profile["speaker_timbre"] is None
    np.testing.assert_array_equal(profile["speaker_embedding"], rsynth.embed_speaker(MALE_CLIP))
    assert rsynth.timbre_strength == 0.0


def test_a_matching_model_measures_the_timbre_once_per_clip(
    matching: Synthesizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    spoken: list[SynthesisRequest] = []
    speak = matching.synthesize_request
    monkeypatch.setattr(matching, "synthesize_request", lambda r: spoken.append(r) or speak(r))
    profile = matching.speaker_profile(MALE_CLIP)
    timbre = profile["speaker_timbre"]
    assert timbre is not None and timbre.shape == (80,) and np.all(np.isfinite(timbre))
    assert float(np.abs(timbre).max()) <= 0.5 * TIMBRE_CLIP + 1e-6 and abs(float(timbre.mean())) < 0.5
    assert [r.text for r in spoken] == list(CALIBRATION)  # the model's own voice for the embedding, no timbre
    assert all(r.speaker_timbre is None and r.speaker_embedding is not None for r in spoken)
    again = matching.speaker_profile(MALE_CLIP.read_bytes())  # same clip as bytes: cached, nothing spoken
    assert len(spoken) == len(CALIBRATION)
    np.testing.assert_array_equal(again["speaker_timbre"], timbre)
    other = matching.speaker_profile(FEMALE_CLIP)["speaker_timbre"]
    assert other is not None and not np.allclose(other, timbre)


def test_the_timbre_reaches_the_audio_and_zero_changes_nothing(matching: Synthesizer) -> None:
    emb = matching.embed_speaker(MALE_CLIP)
    plain = matching.synthesize(TEXT, speaker_embedding=emb).audio
    zero = matching.synthesize(TEXT, speaker_embedding=emb, speaker_timbre=np.zeros(80)).audio
    np.testing.assert_array_equal(zero, plain)
    bright = matching.synthesize(TEXT, speaker_embedding=emb, speaker_timbre=np.linspace(-1, 1, 80)).audio
    assert bright.shape == plain.shape and not np.array_equal(bright, plain)  # a random vocoder: small change


def test_a_clone_keeps_its_spectrum_and_speaks_with_its_timbre(matching: Synthesizer, tmp_path: Path) -> None:
    voice = matching.clone_voice("narrator", MALE_CLIP)
    assert voice.spectrum is not None and voice.spectrum.shape == (80,)
    reread = VoiceStore([], clones_dir=matching.voices.clones_dir).get("narrator")  # another process's view
    assert reread.spectrum is not None
    np.testing.assert_allclose(reread.spectrum, voice.spectrum, atol=1e-4)
    profile = matching.speaker_profile(MALE_CLIP)
    by_name = matching.synthesize(TEXT, voice="narrator").audio
    np.testing.assert_allclose(by_name, matching.synthesize(TEXT, **profile).audio, atol=1e-6)
    assert not np.array_equal(by_name, matching.synthesize(TEXT, speaker_embedding=profile["speaker_embedding"]).audio)
    assert isinstance(matching.bundle, ModelBundle)
    built_in = matching.prepare(SynthesisRequest(text=TEXT, voice="anna"))
    assert built_in.timbre is None  # built-in voices are the model's own: nothing to match


def test_the_train_command_sets_and_checks_the_strength(runtime_model: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rtvox.cli import app

    model = tmp_path / "m"
    shutil.copytree(runtime_model, model)
    runner = CliRunner()
    result = runner.invoke(app, ["train", "timbre-match", "--model", str(model), "0.5"])
    assert result.exit_code == 0, result.output
    assert Synthesizer(model, device="cpu").timbre_strength == 0.5
    result = runner.invoke(app, ["train", "timbre-match", "--model", str(model), "2.5"])
    assert result.exit_code != 0 and "must be from 0 to 2" in result.output
    assert runner.invoke(app, ["train", "timbre-match", "--model", str(model), "0"]).exit_code == 0
    assert "timbre_match" not in (model / "config.json").read_text(encoding="utf-8")
