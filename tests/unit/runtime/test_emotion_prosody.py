"""The host side of the emotion prosody prior: which requests get which row and tilt, and what they change."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from rtvox.models.prosody import IDENTITY_ROW, EmotionProsody, ProsodyShift
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest
from rtvox.training.prosody_prior import write_prior

from .conftest import vary_durations

TEXT = "Hello there, 你好。"
HAPPY = ProsodyShift(pitch_shift=0.6, pitch_range=1.44, energy_shift=0.3, duration=0.81, tilt=0.8)


@pytest.fixture(scope="module")
def prior_model(runtime_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prior") / "tiny"
    shutil.copytree(runtime_model, path)
    write_prior(path, EmotionProsody({"happy": HAPPY}, {"data": "test"}))
    return path


def test_rows_by_request(prior_model: Path) -> None:
    synth = Synthesizer(prior_model, device="cpu")
    happy = synth.prepare(SynthesisRequest(text=TEXT, emotion="happy", emotion_alpha=0.5))
    assert happy.prosody == pytest.approx(HAPPY.row(0.5)) and happy.tilt == pytest.approx(0.4)
    assert happy.prosody == pytest.approx((0.3, 1.2, 0.15, 0.9))
    for request in (
        SynthesisRequest(text=TEXT),
        SynthesisRequest(text=TEXT, emotion="neutral"),
        SynthesisRequest(text=TEXT, emotion="sad"),  # no entry: identity
        SynthesisRequest(text=TEXT, emotion="happy", emotion_alpha=0.0),
        # a reference clip's emotion goes through the learned embedding only
        SynthesisRequest(text=TEXT, emotion="happy", emotion_ref=np.random.default_rng(0).normal(0, 0.1, 24000)),
    ):
        prepared = synth.prepare(request)
        assert prepared.prosody == IDENTITY_ROW and prepared.tilt == 0.0


def test_no_prior_means_the_same_audio_and_a_prior_changes_it(runtime_model: Path, prior_model: Path) -> None:
    plain = vary_durations(Synthesizer(runtime_model, device="cpu"))
    shaped = vary_durations(Synthesizer(prior_model, device="cpu"))
    for request in (SynthesisRequest(text=TEXT, emotion="sad"), SynthesisRequest(text=TEXT)):
        want = plain.synthesize(request.text, emotion=request.emotion).audio
        np.testing.assert_array_equal(shaped.synthesize(request.text, emotion=request.emotion).audio, want)
    happy_plain = plain.synthesize(TEXT, emotion="happy")
    happy = shaped.synthesize(TEXT, emotion="happy")
    # duration 0.81: fewer frames (each phoneme rounded on its own, so not exactly 0.81)
    assert len(happy.audio) < len(happy_plain.audio)
    # the exact-duration path still hits its target with the prior's duration ratio
    assert len(shaped.synthesize(TEXT, emotion="happy", duration=1.5).audio) == len(
        plain.synthesize(TEXT, emotion="happy", duration=1.5).audio
    )


def test_tilt_reaches_the_vocoder_and_nothing_else(prior_model: Path) -> None:
    synth = vary_durations(Synthesizer(prior_model, device="cpu"))
    prepared = synth.prepare(SynthesisRequest(text=TEXT, emotion="happy"))
    flat = dataclasses.replace(prepared, tilt=0.0)
    jobs = [ChunkJob(prepared, i) for i in range(len(prepared.chunks))]
    flat_jobs = [ChunkJob(flat, i) for i in range(len(flat.chunks))]
    for tilted, level in zip(synth.run_step(jobs), synth.run_step(flat_jobs), strict=True):
        assert tilted.durations == level.durations
        assert not np.array_equal(tilted.audio, level.audio)
