"""config.json `language_rates`: a chunk's speed is the request's times its languages' natural rates."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH
from rtvox.models.prosody import EmotionProsody
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob, encode_inputs, encode_row
from rtvox.runtime.types import SynthesisRequest
from rtvox.training.prosody_prior import update_config

from .conftest import vary_durations

EN = "Hello there, how are you today?"
ZH = "今天天气很好。"


def _synth(model: Path) -> Synthesizer:
    return vary_durations(Synthesizer(model, device="cpu"))


def test_english_slows_mandarin_stays_and_targets_stay_exact(runtime_model: Path, tmp_path: Path) -> None:
    rated = tmp_path / "rated"
    shutil.copytree(runtime_model, rated)
    update_config(rated, lambda c: dataclasses.replace(c, language_rates={"en": 0.5}))
    plain, slow = _synth(runtime_model), _synth(rated)
    en_plain, en_slow = len(plain.synthesize(EN).audio), len(slow.synthesize(EN).audio)
    assert 1.6 < en_slow / en_plain < 2.4  # durations twice as long, up to per-phoneme rounding
    assert len(slow.synthesize(ZH).audio) == len(plain.synthesize(ZH).audio)
    for chunk in slow.prepare(SynthesisRequest(text=f"{EN} {ZH} {EN}好的")).chunks:
        tags = {p.split(":")[0] for p in chunk.phonemes if ":" in p}
        want = {frozenset({"en"}): 0.5, frozenset({"zh"}): 1.0}.get(frozenset(tags))
        assert chunk.rate == pytest.approx(want) if want is not None else 0.5 < chunk.rate < 1.0
    target = 2.0
    audio = slow.synthesize(EN, duration=target).audio
    assert len(audio) == round(target * FRAMES_PER_SECOND) * HOP_LENGTH


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_the_request_speed_multiplies_the_language_rate(runtime_model: Path, tmp_path: Path, speed: float) -> None:
    rated = tmp_path / "rated"
    shutil.copytree(runtime_model, rated)
    update_config(rated, lambda c: dataclasses.replace(c, language_rates={"en": 0.8}))
    prepared = _synth(rated).prepare(SynthesisRequest(text=EN))
    assert all(c.rate == pytest.approx(0.8) for c in prepared.chunks)
    request = dataclasses.replace(prepared.request, speed=speed)
    job = ChunkJob(dataclasses.replace(prepared, request=request), 0)
    speeds = encode_inputs([encode_row(job)], prepared.cond.device)[3]
    assert speeds.tolist() == pytest.approx([0.8 * speed])


def test_an_emotion_label_keeps_the_native_rate_its_prior_was_solved_against(
    runtime_model: Path, tmp_path: Path
) -> None:
    rated = tmp_path / "rated"
    shutil.copytree(runtime_model, rated)
    update_config(rated, lambda c: dataclasses.replace(c, language_rates={"en": 0.8}))
    happy = EmotionProsody.from_dict({"happy": {"pitch_shift": 0.3}})  # a label prior, so "happy" gets its row
    update_config(rated, lambda c: dataclasses.replace(c, emotion_prosody=happy))
    synth = _synth(rated)
    assert all(c.rate == pytest.approx(0.8) for c in synth.prepare(SynthesisRequest(text=EN)).chunks)
    assert all(c.rate == pytest.approx(0.8) for c in synth.prepare(SynthesisRequest(text=EN, emotion="neutral")).chunks)
    assert all(c.rate == 1.0 for c in synth.prepare(SynthesisRequest(text=EN, emotion="happy")).chunks)
