"""The emotion speaker shift: measured from packed data, kept in config.json, and applied to label requests only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.constants import SPEAKER_EMBED_DIM
from rtvox.errors import ModelError
from rtvox.models.bundle import ModelBundle, ModelConfig
from rtvox.models.prosody import EmotionSpeakerShift
from rtvox.runtime import Synthesizer
from rtvox.runtime.types import SynthesisRequest
from rtvox.training.data import AcousticSet, PackInfo
from rtvox.training.speaker_shift import speaker_shift, write_speaker_shift

TEXT = "Hello there, 你好。"
INFO = PackInfo(["a", "b", "c"], ["neutral", "happy", "sad"], -12.0, 4.0, 256, 50.0, 800.0)


def _axis(i: int) -> np.ndarray:
    v = np.zeros(SPEAKER_EMBED_DIM, np.float32)
    v[i] = 1.0
    return v


def _data(rows: list[tuple[int, int, np.ndarray]]) -> AcousticSet:
    u = len(rows)
    return AcousticSet(
        info=INFO,
        ids=np.ones(u * 4, np.uint16),
        mel=np.full((u * 8, 80), 100, np.uint8),
        f0=np.zeros(u * 8, np.uint8),
        ph_off=np.arange(u + 1) * 4,
        mel_off=np.arange(u + 1) * 8,
        ge2e=np.stack([r[2] for r in rows]).astype(np.float32),
        speaker=np.array([r[0] for r in rows]),
        emotion=np.array([r[1] for r in rows]),
        lang=np.zeros(u, np.int64),
        utt=[f"u{i}" for i in range(u)],
    )


def test_shift_is_the_mean_speaker_centred_move_of_each_emotion() -> None:
    # a: neutral along axis 0, happy along axis 1; b: neutral along axis 2, happy along axis 2 + axis 3 (unit);
    # c has one neutral clip only (too few): left out; sad has too few clips anywhere: no entry.
    b_happy = (_axis(2) + _axis(3)) / np.sqrt(2)
    rows = [(0, 0, _axis(0))] * 3 + [(0, 1, _axis(1))] * 3 + [(1, 0, _axis(2))] * 3 + [(1, 1, b_happy)] * 3
    rows += [(2, 0, _axis(5)), (2, 1, _axis(6)), (2, 1, _axis(6)), (2, 1, _axis(6)), (0, 2, _axis(7))]
    shift = speaker_shift(_data(rows), min_clips=3)
    want = ((_axis(1) - _axis(0)) + (b_happy - _axis(2))) / 2
    assert set(shift.shifts) == {"happy"} and shift.source["speakers"] == {"happy": 2}
    np.testing.assert_allclose(np.array(shift.shifts["happy"]), want, atol=1e-6)


def test_apply_moves_label_requests_and_keeps_the_rest() -> None:
    d = 0.5 * _axis(1)
    shift = EmotionSpeakerShift({"happy": tuple(d.tolist())})
    voice = _axis(0)
    moved = shift.apply(voice, "happy", 1.0)
    np.testing.assert_allclose(moved, (voice + d) / np.linalg.norm(voice + d), atol=1e-6)
    np.testing.assert_allclose(shift.apply(voice, "happy", 2.0), (voice + 2 * d) / np.linalg.norm(voice + 2 * d))
    for emotion, alpha in (("neutral", 1.0), (None, 1.0), ("sad", 1.0), ("happy", 0.0)):
        assert shift.apply(voice, emotion, alpha) is voice


def test_config_round_trip_and_bad_entries() -> None:
    shift = EmotionSpeakerShift({"sad": tuple([0.25] * SPEAKER_EMBED_DIM)}, {"data": "x"})
    assert EmotionSpeakerShift.from_dict(json.loads(json.dumps(shift.to_dict()))) == shift
    assert EmotionSpeakerShift().to_dict() == {}
    for bad in (
        {"neutral": [0.0] * SPEAKER_EMBED_DIM},
        {"joyful": [0.0] * SPEAKER_EMBED_DIM},
        {"sad": [0.0] * 3},
        {"sad": [float("nan")] * SPEAKER_EMBED_DIM},
        {"sad": ["x"] * SPEAKER_EMBED_DIM},
        [1, 2],
    ):
        with pytest.raises(ModelError, match="emotion_speaker_shift"):
            EmotionSpeakerShift.from_dict(bad)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def shifted_model(runtime_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shift") / "tiny"
    shutil.copytree(runtime_model, path)
    rng = np.random.default_rng(3)
    shift = EmotionSpeakerShift({"happy": tuple((0.3 * rng.standard_normal(SPEAKER_EMBED_DIM)).tolist())})
    write_speaker_shift(path, shift)
    return path


def test_condition_moves_the_speaker_half_of_label_requests_only(runtime_model: Path, shifted_model: Path) -> None:
    plain = Synthesizer(runtime_model, device="cpu")
    synth = Synthesizer(shifted_model, device="cpu")
    assert isinstance(synth.bundle, ModelBundle)
    shift = synth.bundle.config.emotion_speaker_shift
    assert set(shift.shifts) == {"happy"}
    voice = synth.voices.get(synth.default_voice).embedding
    happy = synth.condition(SynthesisRequest(text=TEXT, emotion="happy", emotion_alpha=0.5))
    want = torch.from_numpy(shift.apply(voice, "happy", 0.5))
    torch.testing.assert_close(happy[0, :SPEAKER_EMBED_DIM], want)
    again = synth.condition(SynthesisRequest(text="other text", emotion="happy", emotion_alpha=0.5))
    assert again is happy  # cached by the voice, label and α; the shift is part of what the key names
    torch.testing.assert_close(
        happy[0, SPEAKER_EMBED_DIM:],
        plain.condition(SynthesisRequest(text=TEXT, emotion="happy", emotion_alpha=0.5))[0, SPEAKER_EMBED_DIM:],
    )
    assert not torch.allclose(happy[0, :SPEAKER_EMBED_DIM], torch.from_numpy(voice))
    clip = np.random.default_rng(0).normal(0, 0.1, 24000).astype(np.float32)
    for request in (
        SynthesisRequest(text=TEXT),
        SynthesisRequest(text=TEXT, emotion="neutral"),
        SynthesisRequest(text=TEXT, emotion="sad"),
        SynthesisRequest(text=TEXT, emotion="happy", emotion_alpha=0.0),
        SynthesisRequest(text=TEXT, emotion="happy", emotion_ref=clip),  # a clip's emotion: the learned path only
    ):
        torch.testing.assert_close(synth.condition(request), plain.condition(request))
    # neutral audio is the model's own; a happy request sounds different from the unshifted model's
    np.testing.assert_array_equal(synth.synthesize(TEXT).audio, plain.synthesize(TEXT).audio)
    a, b = synth.synthesize(TEXT, emotion="happy").audio, plain.synthesize(TEXT, emotion="happy").audio
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_speaker_shift_command_writes_the_config(shifted_model: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rtvox",
            "train",
            "speaker-shift",
            "--data",
            str(tmp_path / "none"),
            "--model",
            str(shifted_model),
        ],
        capture_output=True,
        text=True,
    )
    # bad input, one line naming what is missing
    assert done.returncode == 2 and f"data folder {tmp_path / 'none'} does not exist" in done.stderr
    config = ModelConfig.from_dict(json.loads((shifted_model / "config.json").read_text("utf-8")))
    assert set(config.emotion_speaker_shift.shifts) == {"happy"}  # a failed run leaves the config as it was
