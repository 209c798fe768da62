"""The emotion judge's training data handling, fit, and weights round trip (synthetic features)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rtvox.errors import ModelError
from rtvox.eval.emotion_judge import BASIC_EMOTIONS, EmotionJudge, train_judge
from rtvox.eval.judge_data import CorpusFeatures
from rtvox.eval.prosody import FEATURES

# Each emotion moves one feature away from neutral by a known amount (in that feature's units).
SHIFTS = {
    "happy": ("lf0_mean", 0.15),
    "sad": ("energy_mean", -4.0),
    "angry": ("tilt", 2.0),
    "surprised": ("final_slope", 1.0),
}


def synthetic(speakers: dict[str, str], per: int = 12, seed: int = 0) -> CorpusFeatures:
    """Speakers with their own timbre (a random base vector) and emotions as shifts from it."""
    rng = np.random.default_rng(seed)
    ids, spk, emo, split, rows = [], [], [], [], []
    for speaker, speaker_split in speakers.items():
        base = rng.normal(0, 1, len(FEATURES)) + np.array([5, 0.2, 4.8, 5.3, 0, -25, 8, 0.6, -1.7, -3])
        for emotion in BASIC_EMOTIONS:
            for k in range(per):
                row = base + rng.normal(0, 0.02, len(FEATURES))
                row[[1, 6]] = np.abs(row[[1, 6]]) + 0.1  # spreads stay positive
                if emotion in SHIFTS:
                    name, delta = SHIFTS[emotion]
                    row[FEATURES.index(name)] += delta
                ids.append(f"{speaker}-{emotion}-{k}")
                spk.append(speaker)
                emo.append(emotion)
                split.append(speaker_split)
                rows.append(row)
    return CorpusFeatures(ids, spk, emo, split, np.stack(rows))


def test_relative_features_remove_the_speaker() -> None:
    data = synthetic({"a": "train", "b": "train"})
    rel = data.relative_features()
    neutral = [i for i, e in enumerate(data.emotions) if e == "neutral"]
    assert np.abs(rel[neutral]).mean() < 0.05  # leave-one-out: near zero, whatever the speaker's base
    happy = [i for i, e in enumerate(data.emotions) if e == "happy"]
    assert rel[happy, FEATURES.index("lf0_mean")].mean() == pytest.approx(0.15, abs=0.02)


def test_speaker_without_neutral_clips_is_refused() -> None:
    data = synthetic({"a": "train"})
    keep = [i for i, e in enumerate(data.emotions) if e != "neutral"]
    cut = CorpusFeatures(
        [data.ids[i] for i in keep],
        [data.speakers[i] for i in keep],
        [data.emotions[i] for i in keep],
        [data.splits[i] for i in keep],
        data.features[keep],
    )
    with pytest.raises(ValueError, match="neutral clips"):
        cut.relative_features()


def test_judge_learns_shifts_and_generalizes_to_unseen_speakers(tmp_path: Path) -> None:
    speakers = {f"s{i}": "train" for i in range(6)} | {"v0": "val", "h0": "heldout-teacher", "h1": "heldout-teacher"}
    data = synthetic(speakers)
    judge = train_judge(data, labels=BASIC_EMOTIONS)
    assert judge.info["accuracy"]["heldout_5"] >= 0.95
    assert judge.info["heldout_speakers"] == ["h0", "h1"]
    judge.save(tmp_path / "judge")
    loaded = EmotionJudge.load(tmp_path / "judge")
    x = data.relative_features()[:20]
    assert np.allclose(loaded.probabilities(x), judge.probabilities(x), atol=1e-6)
    assert loaded.predict(x, ("neutral", "sad")) == judge.predict(x, ("neutral", "sad"))


def test_features_cache_round_trip(tmp_path: Path) -> None:
    data = synthetic({"a": "train"}, per=2)
    data.save(tmp_path / "f.npz")
    again = CorpusFeatures.load(tmp_path / "f.npz")
    assert again.ids == data.ids and np.array_equal(again.features, data.features)


def test_missing_judge_says_how_to_train(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="rtvox train emotion-judge"):
        EmotionJudge.load(tmp_path)


def test_shipped_judge_loads_and_reports_heldout_accuracy() -> None:
    judge = EmotionJudge.load()
    assert set(BASIC_EMOTIONS) <= set(judge.labels)
    assert judge.info["accuracy"]["heldout_5"] >= 0.8
    assert judge.predict(np.zeros((1, len(FEATURES))), BASIC_EMOTIONS) == ["neutral"]
