"""Settings and metrics plumbing of `rtvox serve --workers`."""

from __future__ import annotations

import pytest

from rtvox.server.config import ServerConfig
from rtvox.server.metrics import _sum_trees


def test_config_round_trips_through_json_for_the_workers() -> None:
    config = ServerConfig(port=9001, api_keys=("a", "b"), cors_origins=("*",), workers=3, deadline_s=None)
    assert ServerConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("workers", [0, -1, 65])
def test_workers_out_of_range_are_refused(workers: int) -> None:
    with pytest.raises(ValueError, match="workers must be 1-64"):
        ServerConfig(workers=workers)


def test_worker_figures_sum_by_key_path() -> None:
    a = {"queue_depth": 2, "requests": {"ok": 5, "expired": 1}, "batch_size_histogram": {"4": 3}, "name": "x"}
    b = {"queue_depth": 1, "requests": {"ok": 7}, "batch_size_histogram": {"4": 1, "8": 2}, "ready": True}
    got = _sum_trees([a, b])
    assert got == {
        "queue_depth": 3,
        "requests": {"ok": 12, "expired": 1},
        "batch_size_histogram": {"4": 4, "8": 2},
        "name": "x",
        "ready": True,  # not a count: kept, never summed
    }
