"""The emotion prosody prior: recovered from data with known shifts, residual against the model, written to
config.json, and measured on a real (tiny) model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rtvox.models.bundle import ModelBundle
from rtvox.models.prosody import EmotionProsody, ProsodyShift
from rtvox.training.data import AcousticSet
from rtvox.training.prosody_prior import (
    FEATURES,
    KNOB_LIMITS,
    KNOBS,
    MATCHED,
    ProsodyStats,
    calibrate,
    data_prosody,
    solve_bounded,
    write_prior,
)

from .conftest import PACK_INFO

INFO = PACK_INFO
# What each emotion does relative to neutral: log-F0 shift, pitch range ratio, level (nats on every band),
# spectral tilt (nats over the band axis), frames ratio.
TRUE = {"happy": (0.12, 1.4, 0.3, 0.6, 0.8), "sad": (-0.08, 0.6, -0.4, -0.9, 1.25)}
PHONEMES = 20  # per utterance
NEUTRAL_FRAMES = 100
BANDS = (np.arange(80) - 39.5) / 80  # centred band positions


def _codes(log_f0: np.ndarray, log_mel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.log(INFO.f0_lo), np.log(INFO.f0_hi)
    f0 = np.round((log_f0 - lo) / (hi - lo) * 254 + 1).astype(np.uint8)
    step = (INFO.mel_hi - INFO.mel_lo) / (INFO.mel_levels - 1)
    return f0, np.round((log_mel - INFO.mel_lo) / step).astype(np.uint8)


def _dataset(clips: int = 4) -> AcousticSet:
    """Three speakers, `clips` utterances per emotion, every frame voiced."""
    rng = np.random.default_rng(0)
    f0s, mels, speakers, emotions, mel_len = [], [], [], [], []
    for speaker, (base_f0, base_level) in enumerate([(np.log(110.0), -5.0), (np.log(220.0), -4.0), (5.0, -6.0)]):
        for emotion, name in enumerate(INFO.emotions):
            shift, ratio, loud, tilt, slow = (0.0, 1.0, 0.0, 0.0, 1.0) if name == "neutral" else TRUE[name]
            for _ in range(clips):
                n = round(NEUTRAL_FRAMES * slow)
                contour = rng.standard_normal(n)
                contour = (contour - contour.mean()) / contour.std()  # exactly mean 0, std 1
                log_f0 = base_f0 + shift + 0.1 * ratio * contour
                level = base_level + loud + 0.05 * rng.standard_normal(n)
                log_mel = level[:, None] + (tilt - 1.0) * BANDS[None, :]  # [n, 80]
                f0, mel = _codes(log_f0, log_mel)
                f0s.append(f0)
                mels.append(mel)
                speakers.append(speaker)
                emotions.append(emotion)
                mel_len.append(n)
    return AcousticSet(
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


def test_data_prior_recovers_known_shifts() -> None:
    measured = data_prosody(_dataset(), min_clips=3)
    assert set(measured) == {"happy", "sad"}
    for name, (shift, ratio, loud, tilt, slow) in TRUE.items():
        got = dict(zip(FEATURES, measured[name].values, strict=True))
        assert measured[name].count == 3
        assert got["lf0_mean"] == pytest.approx(shift, abs=0.01)
        assert got["lf0_log_std"] == pytest.approx(np.log(ratio), abs=0.03)
        # a level of `loud` nats on every band is 20·loud/ln 10 dB of (mel magnitude) power; the tilt moves
        # power between bands of unequal weight
        spread = np.log10(np.exp(2 * (tilt - 1) * BANDS).sum() / np.exp(-2 * BANDS).sum())
        assert got["energy_db"] == pytest.approx(20 * loud / np.log(10) + 10 * spread, abs=0.1)
        assert got["tilt"] == pytest.approx(tilt, abs=0.03)
        assert measured[name].duration == pytest.approx(round(NEUTRAL_FRAMES * slow) / NEUTRAL_FRAMES, rel=1e-9)


def test_speakers_with_too_few_clips_are_left_out() -> None:
    data = _dataset(clips=2)
    assert data_prosody(data, min_clips=3) == {}
    assert data_prosody(data, min_clips=2)["happy"].count == 3


def test_bounded_solve_fixes_a_knob_at_its_bound_and_refits_the_others() -> None:
    response = np.array([[1.0, 0.5], [0.0, 1.0], [1.0, 1.0]])
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    want = response @ np.array([0.3, -0.6])
    np.testing.assert_allclose(solve_bounded(response, want, lo, hi), [0.3, -0.6], atol=1e-12)
    x = solve_bounded(response, response @ np.array([0.2, 1.5]), lo, hi)
    assert x[1] == 1.0
    rest = response @ np.array([0.2, 1.5]) - response[:, 1]
    assert x[0] == pytest.approx(float(np.linalg.lstsq(response[:, :1], rest, rcond=None)[0][0]))
    assert 0.2 < x[0] < 1.0  # it made up for part of what the bounded knob could not do


class _LinearModel:
    """A stand-in renderer: features respond linearly to the knobs, and each emotion has an own effect."""

    voices = ("v1", "v2")

    def __init__(self) -> None:
        rng = np.random.default_rng(3)
        self.response = np.eye(len(FEATURES))[:, : len(KNOBS)] + 0.2 * rng.standard_normal((len(FEATURES), 4))
        self.own = {e: 0.05 * rng.standard_normal(len(FEATURES)) for e in ("neutral", "happy", "sad")}
        self.own["neutral"][:] = 0.0

    def features(self, emotion: str, shift: ProsodyShift) -> np.ndarray:
        knobs = np.array([shift.pitch_shift, np.log(shift.pitch_range), shift.energy_shift, shift.tilt])
        out = self.response @ knobs + self.own[emotion]
        out[-1] += np.log(shift.duration)
        return np.stack([out + 1.0, out - 1.0])  # two voices, different baselines


def test_calibration_makes_the_model_move_like_the_data() -> None:
    model = _LinearModel()
    want = {
        "happy": np.array([0.1, 0.2, 0.05, 0.15, -0.05, 0.8, 0.6, -0.05]),
        "sad": np.array([-0.08, -0.4, 0.03, -0.15, 0.09, -1.0, -0.9, 0.15]),
    }
    data = {e: ProsodyStats.from_vector(v, 30) for e, v in want.items()}
    prior, report = calibrate(model, data)  # type: ignore[arg-type]
    lo, hi = np.array(KNOB_LIMITS).T
    for emotion, target in want.items():
        shift = prior[emotion]
        knobs = np.array([shift.pitch_shift, np.log(shift.pitch_range), shift.energy_shift, shift.tilt])
        assert np.all((knobs >= lo - 1e-9) & (knobs <= hi + 1e-9))
        # the rate is exact: data over the model's own
        assert shift.duration == pytest.approx(np.exp(target[-1] - model.own[emotion][-1]))
        # the matched features are fitted in the least-squares sense: the residual is orthogonal to the response
        got = (model.features(emotion, shift) - model.features("neutral", ProsodyShift())).mean(0)
        assert list(report["with_prior"][emotion].values())[: len(FEATURES)] == pytest.approx(got, abs=1e-4)
        residual = (target - got)[list(MATCHED)]
        scale = np.std([v[list(MATCHED)] for v in want.values()], axis=0) + 1e-3
        normal = (model.response[list(MATCHED)] / scale[:, None]).T @ (residual / scale)
        np.testing.assert_allclose(normal, 0.0, atol=1e-9)
        # and a prior that does nothing would be further off
        learned = model.own[emotion][list(MATCHED)]
        assert np.linalg.norm(residual / scale) < np.linalg.norm((target[list(MATCHED)] - learned) / scale)


@pytest.fixture(scope="module")
def model_dir(make_tiny_model: Callable[[str], Path]) -> Path:
    return make_tiny_model("prior")


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
        "sad": {"pitch_shift": -0.3, "pitch_range": 0.7, "energy_shift": -0.4, "duration": 1.1, "tilt": 0.0},
        "source": {"data": "x", "shards": ["a"]},
    }
    assert after == before
    assert ModelBundle.load(copy).config.emotion_prosody.row("sad", 1.0) == (-0.3, 0.7, -0.4, 1.1)


def test_pitch_bounds_span_every_emotion_and_ignore_tracker_outliers() -> None:
    from rtvox.training.data import speaker_prosody_stats
    from rtvox.training.prosody_prior import pitch_bounds

    data = _dataset(clips=4)
    bounds = pitch_bounds(data, min_frames=500)
    assert bounds is not None
    low, high = bounds
    assert low < 0 < high
    # an emotion with too few voiced frames has no say (happy: 960 frames here), and with none left, no bound
    bounds = pitch_bounds(data, min_frames=1000)
    assert bounds is not None and bounds[1] < high
    assert pitch_bounds(data, min_frames=10_000) is None
    # each emotion's frames (z against its speaker, as the trainer's targets) lie within the bounds but for ≤ 1 %
    # per tail, and the bounds are set by some emotion's tail (happy high, sad low here)
    stats = speaker_prosody_stats(data)
    lo, hi = np.log(INFO.f0_lo), np.log(INFO.f0_hi)
    lengths = np.diff(data.mel_off)
    z = (lo + (data.f0 - 1.0) / 254 * (hi - lo) - stats[np.repeat(data.speaker, lengths), 0]) / stats[
        np.repeat(data.speaker, lengths), 1
    ]
    emotion = np.repeat(data.emotion, lengths)
    for e in range(3):
        v = z[emotion == e]
        assert (v < low - 0.01).mean() <= 0.011 and (v > high + 0.01).mean() <= 0.011
    assert (z[emotion == 1] > high - 0.01).mean() == pytest.approx(0.01, abs=0.005)
    assert (z[emotion == 2] < low + 0.01).mean() == pytest.approx(0.01, abs=0.005)
    # octave errors of the tracker on a few frames (0.3 %, z ≈ 10 after the speaker statistics they also widen)
    # move them only as far as those statistics do
    noisy = data.f0.copy()
    noisy[np.random.default_rng(1).choice(noisy.size, noisy.size * 3 // 1000, replace=False)] = 255
    import dataclasses

    noisy_bounds = pitch_bounds(dataclasses.replace(data, f0=noisy), min_frames=500)
    assert noisy_bounds is not None
    n_low, n_high = noisy_bounds
    assert abs(n_low - low) < 0.5 and abs(n_high - high) < 0.5 and n_high < 4  # the outliers sit far above


def test_write_pitch_bounds_keeps_the_rest(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    from rtvox.training.prosody_prior import write_pitch_bounds

    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
    before = json.loads((copy / "config.json").read_text())
    write_pitch_bounds(copy, (-2.25, 3.5))
    after = json.loads((copy / "config.json").read_text())
    assert after["acoustic"].pop("pitch_bounds") == [-2.25, 3.5]
    before["acoustic"].pop("pitch_bounds", None)
    assert after == before
    assert ModelBundle.load(copy).acoustic.variance.pitch_bounds == (-2.25, 3.5)
