"""Duration-control arithmetic, the emotion WER-change interval and the cloning/duration loops (stand-in model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.expressive import DURATION_FACTORS, duration_error, evaluate_duration, paired_delta_interval


def test_duration_error_arithmetic() -> None:
    assert duration_error(1.0, 1.0) == 0.0
    assert duration_error(1.02, 1.0) == pytest.approx(0.02)
    assert duration_error(0.7, 0.75) == pytest.approx(1 / 15)
    assert duration_error(2.8, 1.4 * 2.0) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="positive"):
        duration_error(1.0, 0.0)


@dataclass
class _Result:
    audio: np.ndarray


class FakeSynth:
    """Natural length 2 s: 0.25 s silence, 1.5 s tone, 0.25 s silence. With a target it returns the target
    length plus `overshoot` of extra silence, its speech scaled to keep the same share."""

    def __init__(self, overshoot_s: float = 0.0) -> None:
        self.overshoot_s = overshoot_s

    def synthesize(self, text: str, voice: Any = None, duration: float | None = None) -> _Result:
        total = 2.0 if duration is None else duration
        speech = total * 0.75
        pad = np.zeros(round((total - speech) / 2 * SAMPLE_RATE), np.float32)
        tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(round(speech * SAMPLE_RATE)) / SAMPLE_RATE)
        extra = np.zeros(0 if duration is None else round(self.overshoot_s * SAMPLE_RATE), np.float32)
        return _Result(np.concatenate([pad, tone.astype(np.float32), pad, extra]))


def test_exact_lengths_score_zero() -> None:
    result = evaluate_duration(FakeSynth(), ["a", "b"])  # type: ignore[arg-type]
    assert result["trials"] == 2 * len(DURATION_FACTORS)
    assert result["max_error"] < 1e-4
    assert result["share_within_2pct"] == 1.0
    assert result["max_span_error"] < 0.01  # frame granularity of the silence trimmer


def test_overshoot_shows_in_whole_length_but_not_in_speech_span() -> None:
    result = evaluate_duration(FakeSynth(overshoot_s=0.1), ["a"])  # type: ignore[arg-type]
    expected = [0.1 / (2.0 * f) for f in DURATION_FACTORS]
    assert [r["error"] for r in result["items"]] == pytest.approx(expected, abs=1e-4)
    assert result["mean_error"] == pytest.approx(np.mean(expected), abs=1e-4)
    assert result["max_span_error"] < 0.01


def test_paired_delta_interval_is_exact_when_every_sentence_moves_alike() -> None:
    neutral = [(1, 10), (0, 8), (2, 12)]
    assert paired_delta_interval(neutral, neutral) == (0.0, 0.0)
    plus_one_each = [(e + 1, n) for e, n in neutral]  # one more error in every sentence: +3 in 30 tokens
    low, high = paired_delta_interval(plus_one_each, neutral)
    assert 1 / 12 - 1e-9 <= low < 3 / 30 < high <= 1 / 8 + 1e-9  # any resample lies between 1/12 and 1/8


def test_paired_delta_interval_is_wide_when_one_sentence_carries_the_difference() -> None:
    neutral = [(0, 10)] * 6
    one_bad = [(6, 10)] + [(0, 10)] * 5  # pooled delta +10 points, all from one sentence
    low, high = paired_delta_interval(one_bad, neutral)
    assert low == 0.0 and high > 0.2  # the interval reaches zero: six sentences do not resolve it


def test_paired_delta_interval_needs_the_same_sentences() -> None:
    with pytest.raises(ValueError, match="same sentences"):
        paired_delta_interval([(1, 10)], [(1, 10), (0, 5)])
