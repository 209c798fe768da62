"""The HTTP load benchmark against a real server (tiny random model, uvicorn on loopback)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rtvox.errors import InputError
from rtvox.runtime.httpload import PCM_BYTES_PER_SECOND, HTTPStreamError, parse_url, post_stream, run_http_load

from .server_harness import LiveServer, free_port


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> LiveServer:  # type: ignore[misc]
    with LiveServer(tiny_model, tmp_path_factory.mktemp("voices"), api_keys=("sekret",)) as live:
        yield live


def test_a_streamed_response_is_counted_by_its_bytes(server: LiveServer) -> None:
    host, port, _ = parse_url(server.url)
    body = json.dumps({"text": "Hello there.", "response_format": "pcm", "duration": 1.5}).encode()
    arrivals, sizes = asyncio.run(post_stream(host, port, "/v1/tts", body, {"Authorization": "Bearer sekret"}))
    assert arrivals == sorted(arrivals)
    assert sum(sizes) / PCM_BYTES_PER_SECOND == pytest.approx(1.5, abs=0.02)  # the exact duration asked for


def test_refusals_are_errors_that_quote_the_server(server: LiveServer) -> None:
    host, port, _ = parse_url(server.url)
    body = json.dumps({"text": "Hello.", "response_format": "pcm"}).encode()
    with pytest.raises(HTTPStreamError, match="HTTP 401"):
        asyncio.run(post_stream(host, port, "/v1/tts", body, {}))
    bad = json.dumps({"text": "Hello.", "voice": "nobody", "response_format": "pcm"}).encode()
    with pytest.raises(HTTPStreamError, match=r"HTTP 4\d\d.*nobody"):
        asyncio.run(post_stream(host, port, "/v1/tts", bad, {"Authorization": "Bearer sekret"}))


def test_levels_and_baseline_over_http(server: LiveServer) -> None:
    result = run_http_load(
        server.url,
        levels=[1, 3],
        level_duration_s=3.0,
        think_time_s=0.2,
        ttfa_p99_target_s=5.0,
        baseline_requests=2,
        saturation_clients=2,
        client_processes=2,
        api_key="sekret",
    )
    assert result.baseline["requests"] == 2 and result.baseline["audio_s_per_s"] > 0
    assert [lv.concurrency for lv in result.levels] == [1, 3]
    for level in [*result.levels, result.saturation]:
        assert level is not None and level.errors == 0 and level.streams >= 1
        assert 0 < level.ttfa_p50_ms <= level.ttfa_p99_ms
    assert result.settings["errors"] == {}
    assert result.machine["server_health"]["status"] == "ok"


def test_a_wrong_key_fails_every_level_and_says_why(server: LiveServer) -> None:
    with pytest.raises(HTTPStreamError, match="HTTP 401"):  # the baseline's first request already
        run_http_load(server.url, levels=[1], level_duration_s=1.0, baseline_requests=1, api_key="wrong")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1/", "127.0.0.1:8000", "http://"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InputError, match="http://HOST:PORT"):
        parse_url(url)


def test_no_server_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="no rtvox server answers"):
        run_http_load(f"http://127.0.0.1:{free_port()}", levels=[1])
