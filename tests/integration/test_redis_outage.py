"""The server under real Redis outages (refused, hung, wrong db, restarted empty): requests never fail or wait on
Redis, /health tells the truth, and clones made or deleted while Redis was away are shared once it is back."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rtvox.runtime import cache_redis
from rtvox.runtime.service import ServiceConfig
from rtvox.runtime.voices import CLONE_SUFFIX

from .server_harness import LiveServer
from .test_cache import RedisServer, needs_server, redis_server  # noqa: F401  (fixture)

DATA = Path(__file__).resolve().parents[1] / "data"
BACKOFF_S = 0.3
SPEECH = {"model": "tts-1", "input": "Hello.", "response_format": "pcm"}


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(cache_redis, "DEFAULT_RETRY_BACKOFF_S", BACKOFF_S)
    monkeypatch.delenv("RTVOX_REDIS_URL", raising=False)
    yield


def _server(model: Path, voices_dir: Path, url: str) -> LiveServer:
    """As `rtvox serve --redis-url` wires it: the embedding tier and the voice table on the same Redis."""
    return LiveServer(model, voices_dir, service=ServiceConfig(redis_url=url, fallback_device=None), redis_url=url)


def _clone(base: str, name: str) -> str:
    files = {"audio_sample": ("clip.wav", (DATA / "speech_en_male_16k.wav").read_bytes(), "audio/wav")}
    response = httpx.post(f"{base}/v1/audio/voices", data={"name": name}, files=files, timeout=60)
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def _speak(base: str, voice: str) -> int:
    return httpx.post(f"{base}/v1/audio/speech", json={**SPEECH, "voice": voice}, timeout=60).status_code


def _cache_health(base: str) -> dict[str, object]:
    cache: dict[str, object] = httpx.get(f"{base}/health", timeout=10).json()["service"]["cache"]
    return cache


@needs_server
def test_a_hung_redis_costs_one_timeout_not_one_per_request(
    tiny_model: Path,
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A backoff longer than the loop below takes on a busy 2-core machine: every request in it falls inside the
    # first probe's backoff, so any wait on Redis there would be a second timeout, not the next scheduled probe.
    backoff_s = 5.0
    monkeypatch.setattr(cache_redis, "DEFAULT_RETRY_BACKOFF_S", backoff_s)
    with _server(tiny_model, tmp_path / "a", redis_server.url) as a:
        assert redis_server.proc is not None
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            with caplog.at_level(logging.WARNING):
                first = time.perf_counter()
                assert httpx.get(f"{a.url}/v1/audio/voices", timeout=10).status_code == 200  # meets the timeout
                first_s = time.perf_counter() - first
                slowest = 0.0
                for _ in range(5):  # within the backoff: Redis is skipped, not waited on again
                    started = time.perf_counter()
                    assert httpx.get(f"{a.url}/v1/audio/voices", timeout=10).status_code == 200
                    assert _speak(a.url, "voice_0123456789abcdef") == 400  # an unknown id: no wait on Redis
                    slowest = max(slowest, time.perf_counter() - started)
            assert first_s < 2.0 and slowest < 0.3, (first_s, slowest)
            health = _cache_health(a.url)
            assert health["status"] == "redis-down"  # the voice table's outage is reported, not only the cache's
            unreachable = [r for r in caplog.records if "unreachable" in r.getMessage()]
            assert len(unreachable) == 1  # one warning per outage, not one per request
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        loop_s = time.perf_counter() - first
        assert loop_s < backoff_s, loop_s  # the loop stayed inside the backoff, as the bound above assumes
        time.sleep(first_s + backoff_s - loop_s + 0.1)  # the backoff runs from the failed probe's end
        assert _cache_health(a.url)["status"] == "redis-up"


@needs_server
def test_a_wrong_db_index_at_startup_serves_and_says_so(
    tiny_model: Path,
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/99"  # redis-server has 16 databases: SELECT 99 is refused
    with _server(tiny_model, tmp_path / "a", url) as a:
        assert _speak(a.url, "alloy") == 200
        clone = _clone(a.url, "Local")
        assert _speak(a.url, clone) == 200
        health = _cache_health(a.url)
        assert health["status"] == "redis-down" and "DB index" in str(health["redis"]["error"])  # type: ignore[index]
        time.sleep(BACKOFF_S + 0.1)  # a probe after the backoff meets the same error: still down, never "up"
        assert _speak(a.url, "voice_0123456789abcdef") == 400
        assert _cache_health(a.url)["status"] == "redis-down"


@needs_server
def test_clones_made_before_and_during_an_outage_are_shared_when_redis_returns_empty(
    tiny_model: Path,
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with _server(tiny_model, tmp_path / "a", redis_server.url) as a:
        before = _clone(a.url, "Before")
        redis_server.stop()
        during = _clone(a.url, "During")
        assert _speak(a.url, during) == 200 and _speak(a.url, before) == 200
        redis_server.start()  # empty: the table written before the outage is gone
        time.sleep(BACKOFF_S + 0.1)
        assert _cache_health(a.url)["status"] == "redis-up"
        assert _speak(a.url, during) == 200  # a local clone: no wait on Redis, the catch-up runs beside it
        table = redis_server.client()
        deadline = time.monotonic() + 5
        while not (table.hexists("rtvox:voices", before) and table.hexists("rtvox:voices", during)):
            assert time.monotonic() < deadline, "a's clones were not published again"
            time.sleep(0.05)
        with _server(tiny_model, tmp_path / "b", redis_server.url) as b:
            assert _speak(b.url, before) == 200
            assert _speak(b.url, during) == 200


@needs_server
def test_a_clone_deleted_during_an_outage_stays_deleted(
    tiny_model: Path,
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with _server(tiny_model, tmp_path / "a", redis_server.url) as a:
        voice = _clone(a.url, "Gone")
        redis_server.client().save()  # so the restart below brings the table back, entry included
        redis_server.stop()
        assert httpx.delete(f"{a.url}/v1/audio/voices/{voice}", timeout=10).status_code == 200
        redis_server.start()
        assert redis_server.client().hexists("rtvox:voices", voice)
        time.sleep(BACKOFF_S + 0.1)
        assert _cache_health(a.url)["status"] == "redis-up"
        assert _speak(a.url, voice) == 400  # not fetched back from the table: the delete was caught up
        assert not redis_server.client().hexists("rtvox:voices", voice)


@needs_server
def test_a_delete_survives_redis_restarting_empty_and_the_deleting_server_restarting(
    tiny_model: Path,
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """b holds a copy of a clone that a deleted; Redis then comes back empty (table and tombstones gone) and b,
    catching up first, publishes its copy again. a, restarted meanwhile, still knows its delete from disk: its
    catch-up removes the entry and sends the tombstone again, so b drops its copy and no server serves the voice."""
    voices = lambda base: httpx.get(f"{base}/v1/audio/voices", timeout=10)  # noqa: E731 (each read syncs deletes)
    with _server(tiny_model, tmp_path / "b", redis_server.url) as b:
        with _server(tiny_model, tmp_path / "a", redis_server.url) as a:
            voice = _clone(a.url, "Gone")
            assert _speak(b.url, voice) == 200  # b adopts a copy from the table
            assert httpx.delete(f"{a.url}/v1/audio/voices/{voice}", timeout=10).status_code == 200
        assert (tmp_path / "a" / ".deleted" / voice).is_file()
        assert (tmp_path / "b" / f"{voice}{CLONE_SUFFIX}").is_file()  # b has not read the tombstone yet
        redis_server.stop()
        assert voices(b.url).status_code == 200  # b meets the outage (its delete sync fails): it will catch up
        redis_server.start()  # empty
        time.sleep(BACKOFF_S + 0.1)
        assert voices(b.url).status_code == 200
        table = redis_server.client()
        assert table.hexists("rtvox:voices", voice)  # b published its copy: Redis forgot the delete
        with _server(tiny_model, tmp_path / "a", redis_server.url) as a2:
            assert voices(a2.url).status_code == 200  # a's first contact catches up: its delete again
            assert not table.hexists("rtvox:voices", voice)
            assert table.zscore("rtvox:voices:deleted", voice) is not None
            deadline = time.monotonic() + 5
            while voice in {v["id"] for v in voices(b.url).json()["data"]}:
                assert time.monotonic() < deadline, "b kept serving a clone deleted on a"
                time.sleep(0.2)
            assert _speak(b.url, voice) == 400
            assert _speak(a2.url, voice) == 400
        with _server(tiny_model, tmp_path / "c", redis_server.url) as c:
            assert _speak(c.url, voice) == 400  # nowhere to adopt it from
