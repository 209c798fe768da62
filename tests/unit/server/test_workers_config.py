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


def test_unset_workers_and_fused_kernels_round_trip() -> None:
    config = ServerConfig()
    assert config.workers is None and config.fused_kernels is None
    again = ServerConfig.from_json(ServerConfig(fused_kernels=False, workers=2).to_json())
    assert again.fused_kernels is False and again.workers == 2


class _Props:
    def __init__(self, gib: int) -> None:
        self.total_memory = gib * 1024**3


@pytest.mark.parametrize(("gib", "expected"), [(80, 2), (141, 2), (48, 2), (40, 1), (24, 1)])
def test_unset_workers_on_a_gpu_follow_its_memory(monkeypatch: pytest.MonkeyPatch, gib: int, expected: int) -> None:
    import torch

    from rtvox.runtime import synthesizer
    from rtvox.server import serve

    monkeypatch.setattr(synthesizer, "resolve_device", lambda name: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _Props(gib))
    assert serve.resolve_workers(ServerConfig(device="cuda")) == expected
    assert serve.resolve_workers(ServerConfig(device="cuda", workers=3)) == 3  # a set count is kept


def test_unset_workers_on_the_cpu_is_one() -> None:
    from rtvox.server.serve import resolve_workers

    assert resolve_workers(ServerConfig(device="cpu")) == 1
    assert resolve_workers(ServerConfig(device="cpu", workers=2)) == 2


def test_gpu_workers_capture_one_at_a_time(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    import threading

    import torch

    from rtvox.runtime import synthesizer
    from rtvox.server import serve
    from rtvox.server.metrics import METRICS_DIR_ENV

    monkeypatch.setenv(METRICS_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(synthesizer, "resolve_device", lambda name: torch.device(name))
    config = ServerConfig(device="cuda", workers=2)
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with serve._one_capture_at_a_time(config):
            order.append("first in")
            inside.set()
            release.wait(10)
            order.append("first out")

    def second() -> None:
        with serve._one_capture_at_a_time(config):
            order.append("second in")

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.3)
    assert b.is_alive()  # waits for the first capture to end
    release.set()
    a.join(10)
    b.join(10)
    assert order == ["first in", "first out", "second in"]
    with serve._one_capture_at_a_time(ServerConfig(device="cpu", workers=2)):  # CPU workers do not wait
        pass
