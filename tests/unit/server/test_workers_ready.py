"""Readiness across server workers: each worker's runtime snapshot carries its own readiness, and
RuntimeCollector.workers_ready counts the live workers that are ready (stale or dead workers' snapshots left out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rtvox.server.metrics import SNAPSHOT_PREFIX, RuntimeCollector


def _collector(shared: Path | None, ready: bool) -> RuntimeCollector:
    return RuntimeCollector(lambda: {"queue_depth": 0}, lambda: {}, str(shared) if shared else None, lambda: ready)


def _peer(shared: Path, pid: int, ready: bool, age_s: float = 0.0) -> None:
    snap = {"pid": pid, "time": time.time() - age_s, "stats": {"queue_depth": 0}, "memory": {}, "ready": ready}
    (shared / f"{SNAPSHOT_PREFIX}{pid}.json").write_text(json.dumps(snap), encoding="utf-8")


def test_outside_workers_the_process_answers_for_itself() -> None:
    assert _collector(None, True).workers_ready() == (1, 1)
    assert _collector(None, False).workers_ready() == (0, 1)


def test_snapshot_carries_readiness(tmp_path: Path) -> None:
    collector = _collector(tmp_path, False)
    collector.publish()
    snap = json.loads((tmp_path / f"{SNAPSHOT_PREFIX}{os.getpid()}.json").read_text(encoding="utf-8"))
    assert snap["ready"] is False and snap["pid"] == os.getpid()


def test_counts_live_ready_peers_only(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        _peer(tmp_path, sleeper.pid, ready=False)
        _peer(tmp_path, dead.pid, ready=True)  # its process is gone: not counted
        collector = _collector(tmp_path, True)
        assert collector.workers_ready() == (1, 2)  # this one ready, the live peer still warming up
        _peer(tmp_path, sleeper.pid, ready=True)
        assert collector.workers_ready() == (2, 2)
        _peer(tmp_path, sleeper.pid, ready=True, age_s=3600)  # stopped publishing long ago: left out
        assert collector.workers_ready() == (1, 1)
        (tmp_path / f"{SNAPSHOT_PREFIX}999999999.json").write_text("{not json", encoding="utf-8")  # foreign/half
        assert collector.workers_ready() == (1, 1)
    finally:
        sleeper.kill()
        sleeper.wait()
