"""The 95 % bootstrap interval of a set's pooled error rate, beside the pooled rate in `rtvox eval`'s results."""

from __future__ import annotations

import pytest

from rtvox.eval.intelligibility import rate_interval, summarize
from rtvox.eval.metrics import ErrorCounts
from rtvox.eval.report import intelligibility_rows


def test_the_interval_collapses_when_every_sentence_has_the_same_rate() -> None:
    assert rate_interval([(1, 10), (2, 20), (3, 30)]) == pytest.approx((0.1, 0.1))


def test_one_bad_sentence_in_twenty_leaves_a_wide_interval_around_the_pooled_rate() -> None:
    counts = [(8, 10)] + [(0, 10)] * 19  # pooled 4 %: all of it one sentence's
    low, high = rate_interval(counts)
    assert low == 0.0 and high > 0.1  # a rerun could read 0 % or over 10 % by chance alone


def test_summaries_and_the_table_carry_the_interval() -> None:
    items = [
        {"seconds": 1.0, "metrics": {"wer": {"rate": r, "errors": e, "reference_length": n}}}
        for r, e, n in ((0.0, 0, 10), (0.5, 5, 10))
    ]
    summary = summarize("en", items, {"wer": ErrorCounts(5, 0, 0, 20)})
    low, high = summary["metrics"]["wer"]["ci95"]
    assert 0.0 <= low <= 0.25 <= high <= 0.5
    (row,) = intelligibility_rows({"sets": {"en": {"summary": summary}}})[2:]
    assert f"25.0 % [{100 * low:.1f} %, {100 * high:.1f} %]" in row
    old = {**summary, "metrics": {"wer": {k: v for k, v in summary["metrics"]["wer"].items() if k != "ci95"}}}
    assert "| 25.0 % |" in intelligibility_rows({"sets": {"en": {"summary": old}}})[2]  # files from before
