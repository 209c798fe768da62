"""The emotion prosody prior: recovered from data with known shifts, residual against the model, written to
config.json, and measured on a real (tiny) model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rtvox.models.bundle import ModelBundle, make_random_bundle
from rtvox.models.prosody import EmotionProsody, ProsodyShift
from rtvox.runtime import Synthesizer
from rtvox.text import Vocabulary
from rtvox.training.data import AcousticSet, PackInfo
from rtvox.training.prosody_prior import (
    ProsodyStats,
    data_prosody,
    model_prosody,
    residual_prior,
    write_prior,
)

INFO = PackInfo(
    speakers=["a", "b", "c"],
    emotions=["neutral", "happy", "sad"],
    mel_lo=-12.0,
    mel_hi=4.0,
    mel_levels=256,
    f0_lo=50.0,
    f0_hi=800.0,
)
# What each emotion does relative to neutral, in absolute units: log-F0 shift, pitch range ratio, energy
# shift (mean log-mel), frames ratio.
TRUE = {"happy": (0.12, 1.4, 0.8, 0.8), "sad": (-0.08, 0.6, -0.6, 1.25)}
PHONEMES = 20  # per utterance
NEUTRAL_FRAMES = 100


def _codes(log_f0: np.ndarray, energy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.log(INFO.f0_lo), np.log(INFO.f0_hi)
    f0 = np.round((log_f0 - lo) / (hi - lo) * 254 + 1).astype(np.uint8)
    step = (INFO.mel_hi - INFO.mel_lo) / (INFO.mel_levels - 1)
    mel = np.round((energy - INFO.mel_lo) / step).astype(np.uint8)
    return f0, np.repeat(mel[:, None], 80, axis=1)


def _dataset(clips: int = 4) -> tuple[AcousticSet, dict[str, tuple[float, float, float, float]]]:
    """Three speakers, `clips` utterances per emotion; returns the set and the expected prior in z units."""
    rng = np.random.default_rng(0)
    f0s, mels, speakers, emotions, mel_len, frames_by = [], [], [], [], [], []
    for speaker, (base_f0, base_energy) in enumerate([(np.log(110.0), -5.0), (np.log(220.0), -4.0), (5.0, -6.0)]):
        for emotion, name in enumerate(INFO.emotions):
            shift, ratio, loud, slow = (0.0, 1.0, 0.0, 1.0) if name == "neutral" else TRUE[name]
            for _ in range(clips):
                n = round(NEUTRAL_FRAMES * slow)
                contour = rng.standard_normal(n)
                contour = (contour - contour.mean()) / contour.std()  # exactly mean 0, std 1
                log_f0 = base_f0 + shift + 0.1 * ratio * contour
                energy = base_energy + loud + 0.5 * rng.standard_normal(n)
                f0, mel = _codes(log_f0, energy)
                f0s.append(f0)
                mels.append(mel)
                speakers.append(speaker)
                emotions.append(emotion)
                mel_len.append(n)
        frames_by.append(speaker)
    data = AcousticSet(
        info=INFO,
        ids=np.ones(PHONEMES * len(mel_len), np.uint16),
        mel=np.concatenate(mels),
        f0=np.concatenate(f0s),
        ph_off=np.arange(len(mel_len) + 1) * PHONEMES,
        mel_off=np.concatenate([[0], np.cumsum(mel_len)]),
        ge2e=np.zeros((len(mel_len), 256), np.float32),
        speaker=np.array(speakers),
        emotion=np.array(emotions),
        lang=np.zeros(len(mel_len), np.int64),
        utt=[str(i) for i in range(len(mel_len))],
    )
    # Expected values in each speaker's z units: its std over all of its frames (every emotion), as training uses.
    expected = {}
    for name, (shift, ratio, loud, slow) in TRUE.items():
        pitch, energy = [], []
        for speaker in range(3):
            frames = np.repeat(data.speaker, np.diff(data.mel_off)) == speaker
            lo, hi = np.log(INFO.f0_lo), np.log(INFO.f0_hi)
            log_f0 = lo + (data.f0[frames].astype(np.float64) - 1) / 254 * (hi - lo)
            step = (INFO.mel_hi - INFO.mel_lo) / (INFO.mel_levels - 1)
            e = data.mel[frames, 0] * step + INFO.mel_lo
            pitch.append(shift / log_f0.std())
            energy.append(loud / e.std())
        expected[name] = (float(np.mean(pitch)), ratio, float(np.mean(energy)), round(NEUTRAL_FRAMES * slow) / 100)
    return data, expected


def test_data_prior_recovers_known_shifts() -> None:
    data, expected = _dataset()
    measured = data_prosody(data, min_clips=3)
    assert set(measured) == {"happy", "sad"}
    for name, (shift, ratio, loud, slow) in expected.items():
        got = measured[name]
        assert got.count == 3
        assert got.pitch_shift == pytest.approx(shift, abs=0.03)
        assert got.pitch_range == pytest.approx(ratio, rel=0.03)
        assert got.energy_shift == pytest.approx(loud, abs=0.05)
        assert got.duration == pytest.approx(slow, rel=1e-6)
    assert measured["happy"].pitch_shift > 0.3 and measured["sad"].energy_shift < -0.3  # the shifts are real


def test_speakers_with_too_few_clips_are_left_out() -> None:
    data, _ = _dataset(clips=2)
    assert data_prosody(data, min_clips=3) == {}
    assert data_prosody(data, min_clips=2)["happy"].count == 3


def test_residual_subtracts_shifts_and_divides_ratios() -> None:
    data = {"happy": ProsodyStats(0.5, 1.3, 0.2, 0.9, 30), "sad": ProsodyStats(-0.4, 0.6, -0.5, 1.2, 30)}
    model = {"happy": ProsodyStats(0.1, 1.1, 0.05, 1.0, 4), "sad": ProsodyStats(0.0, 1.0, -0.1, 1.05, 4)}
    prior = residual_prior(data, model)
    happy = prior["happy"]
    assert (happy.pitch_shift, happy.energy_shift) == pytest.approx((0.4, 0.15))
    assert (happy.pitch_range, happy.duration) == pytest.approx((1.3 / 1.1, 0.9))
    assert prior["sad"].duration == pytest.approx(1.2 / 1.05)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prior") / "tiny"
    voices = {"anna": {"gender": "female", "language": "zh"}, "ben": {"gender": "male", "language": "en"}}
    make_random_bundle(path, preset="tiny", vocab=Vocabulary.default().to_dict(), seed=0, voices=voices)
    return path


def test_model_measurement_reads_the_predictors_and_ignores_a_stored_prior(model_dir: Path, tmp_path: Path) -> None:
    synth = Synthesizer(model_dir, device="cpu")
    sentences = ("The cat sat on the mat.", "今天天气很好。")
    own = model_prosody(synth, sentences)
    assert set(own) == {"happy", "sad", "angry", "surprised", "fearful", "disgusted"}
    assert all(s.count == 2 and s.pitch_range > 0 and s.duration > 0 for s in own.values())
    # A random model's emotions do differ a little: the measurement is not a constant.
    assert any(abs(s.pitch_shift) > 1e-6 for s in own.values())
    # A stored prior must not change what the model is measured to do on its own (it would be counted twice).
    import shutil

    copy = tmp_path / "with-prior"
    shutil.copytree(model_dir, copy)
    write_prior(copy, EmotionProsody({"happy": ProsodyShift(1.0, 2.0, 1.0, 0.5)}))
    again = model_prosody(Synthesizer(copy, device="cpu"), sentences)
    assert again["happy"] == own["happy"]


def test_write_prior_keeps_the_rest_of_the_config(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
    before = json.loads((copy / "config.json").read_text())
    assert "emotion_prosody" not in before
    prior = EmotionProsody({"sad": ProsodyShift(-0.3, 0.7, -0.4, 1.1)}, {"data": "x", "shards": ["a"]})
    write_prior(copy, prior)
    after = json.loads((copy / "config.json").read_text())
    assert after.pop("emotion_prosody") == {
        "sad": {"pitch_shift": -0.3, "pitch_range": 0.7, "energy_shift": -0.4, "duration": 1.1},
        "source": {"data": "x", "shards": ["a"]},
    }
    assert after == before
    assert ModelBundle.load(copy).config.emotion_prosody.row("sad", 1.0) == (-0.3, 0.7, -0.4, 1.1)
