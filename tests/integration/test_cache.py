"""Embedding cache against a real redis-server: sharing between processes, outages, recovery, corrupt values."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import redis

from rtvox.runtime.cache import REDIS_KEY_PREFIX, EmbeddingCache, content_key

NS = "speaker:ge2e-v1"
BACKOFF_S = 0.3
REDIS_SERVER = shutil.which("redis-server")
needs_server = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server binary not found; install it (apt-get install -y redis-server)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(256).astype(np.float32)


class RedisServer:
    """A throwaway redis-server on a localhost port, with no persistence, that tests can stop and restart."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=0.2, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=1)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(_free_port(), tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_redis_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTVOX_REDIS_URL", raising=False)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@needs_server
def test_two_processes_share_through_redis(redis_server: RedisServer) -> None:
    a = EmbeddingCache(capacity=8, redis_url=redis_server.url)
    b = EmbeddingCache(capacity=8, redis_url=redis_server.url)
    key = content_key(b"clip")
    a.put(NS, key, _vec(1))
    got = b.get(NS, key)
    assert got is not None
    np.testing.assert_array_equal(got, _vec(1))
    assert b.stats() == {"local": {"hits": 0, "misses": 1}, "redis": {"hits": 1, "misses": 0, "corrupt": 0}}
    np.testing.assert_array_equal(b.get(NS, key), _vec(1))  # now filled locally
    assert b.stats()["local"] == {"hits": 1, "misses": 1}
    assert b.stats()["redis"]["hits"] == 1
    assert b.health()["redis"] == {"configured": True, "ok": True, "error": None, "url": redis_server.url}
    a.close()
    b.close()


@needs_server
def test_get_or_compute_is_shared_across_processes(redis_server: RedisServer) -> None:
    calls: list[str] = []

    def compute() -> np.ndarray:
        calls.append("x")
        return _vec(7)

    for _ in range(2):
        cache = EmbeddingCache(capacity=8, redis_url=redis_server.url)
        for _ in range(2):
            np.testing.assert_array_equal(cache.get_or_compute(NS, b"clip", compute), _vec(7))
        cache.close()
    assert calls == ["x"]


@needs_server
def test_ttl_expires_redis_entries(redis_server: RedisServer) -> None:
    cache = EmbeddingCache(capacity=8, redis_url=redis_server.url, ttl_s=60)
    cache.put(NS, "k", _vec(1))
    ttl_ms = redis_server.client().pttl(REDIS_KEY_PREFIX + NS + ":k")
    assert 0 < int(ttl_ms) <= 60_000
    cache.close()


@needs_server
def test_corrupt_redis_value_is_a_miss_and_recomputed(redis_server: RedisServer) -> None:
    key = content_key(b"clip")
    full = REDIS_KEY_PREFIX + NS + ":" + key
    raw = redis_server.client()
    cache = EmbeddingCache(capacity=8, redis_url=redis_server.url)
    for bad in (b"garbage", b"RTVE\x01\x01\x00\x01\x00\x00" + b"\0" * 3, _vec(0).tobytes()):
        raw.set(full, bad)
        assert cache.get(NS, key) is None
    raw.lpush(full + "-list", b"x")  # a key of the wrong type is a miss too, not an error
    assert cache.get(NS, key + "-list") is None
    assert cache.stats()["redis"] == {"hits": 0, "misses": 4, "corrupt": 3}
    np.testing.assert_array_equal(cache.get_or_compute(NS, b"clip", lambda: _vec(3)), _vec(3))
    assert cache.health()["redis"]["ok"] is True
    other = EmbeddingCache(capacity=8, redis_url=redis_server.url)  # the recompute overwrote the corrupt value
    np.testing.assert_array_equal(other.get(NS, key), _vec(3))
    cache.close()
    other.close()


def test_redis_down_at_start_works_locally_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://:secret@127.0.0.1:{_free_port()}/0"  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="rtvox.runtime.cache_redis"):
        cache = EmbeddingCache(capacity=8, redis_url=url, retry_backoff_s=60)
        health = cache.health()["redis"]
        assert health["configured"] is True and health["ok"] is False and health["error"]
        assert "secret" not in str(health["url"])
        t0 = time.monotonic()
        for i in range(50):
            assert cache.get_or_compute(NS, f"clip-{i % 5}".encode(), partial(_vec, i % 5)) is not None
        assert time.monotonic() - t0 < 1.0  # the tier is skipped during the backoff, not retried per request
    assert len(_warnings(caplog)) == 1
    assert "unreachable" in _warnings(caplog)[0] and "secret" not in _warnings(caplog)[0]
    assert cache.stats()["local"] == {"hits": 45, "misses": 5}
    assert cache.stats()["redis"]["hits"] == 0


def test_hung_redis_cannot_stall_requests(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as hung:  # accepts connections (kernel backlog) but never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        url = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="rtvox.runtime.cache_redis"):
            cache = EmbeddingCache(capacity=8, redis_url=url, retry_backoff_s=60)
            for _ in range(20):
                cache.get_or_compute(NS, b"clip", partial(_vec, 1))
        assert time.monotonic() - t0 < 1.0  # one 0.2 s timeout at start, then the tier is skipped
        health = cache.health()["redis"]
        assert health["ok"] is False and "Timeout" in str(health["error"])
        assert len(_warnings(caplog)) == 1


def test_redis_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTVOX_REDIS_URL", f"redis://127.0.0.1:{_free_port()}/0")
    assert EmbeddingCache(retry_backoff_s=60).health()["redis"]["configured"] is True
    assert EmbeddingCache(redis_url="").health()["redis"]["configured"] is False


@needs_server
def test_redis_killed_then_restarted(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    cache = EmbeddingCache(capacity=2, redis_url=redis_server.url, retry_backoff_s=BACKOFF_S)
    cache.put(NS, "before", _vec(1))
    assert cache.health()["redis"]["ok"] is True

    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="rtvox.runtime.cache_redis"):
        for i in range(20):
            cache.put(NS, f"during{i}", _vec(i))
            assert cache.get(NS, f"during{i}") is not None  # the local tier keeps serving
        assert cache.get(NS, "before") is None  # evicted locally, and Redis is gone
        assert cache.health()["redis"]["ok"] is False
        assert len(_warnings(caplog)) == 1

        redis_server.start()  # same port, empty data
        redis_server.client().set(REDIS_KEY_PREFIX + NS + ":shared", _encode(_vec(9)))
        time.sleep(BACKOFF_S + 0.1)
        np.testing.assert_array_equal(cache.get(NS, "shared"), _vec(9))
    assert cache.health()["redis"] == {"configured": True, "ok": True, "error": None, "url": redis_server.url}
    assert any("reachable again" in w for w in _warnings(caplog))
    cache.put(NS, "after", _vec(2))
    assert redis_server.client().exists(REDIS_KEY_PREFIX + NS + ":after") == 1
    cache.close()


@needs_server
def test_health_probes_after_backoff(redis_server: RedisServer) -> None:
    cache = EmbeddingCache(capacity=2, redis_url=redis_server.url, retry_backoff_s=BACKOFF_S)
    redis_server.stop()
    assert cache.get(NS, "k") is None
    assert cache.health()["redis"]["ok"] is False
    redis_server.start()
    time.sleep(BACKOFF_S + 0.1)
    assert cache.health()["redis"]["ok"] is True  # health() itself re-probes, so a readiness check sees recovery
    cache.close()


def _encode(value: np.ndarray) -> bytes:
    from rtvox.runtime.cache import encode_embedding

    return encode_embedding(value)
