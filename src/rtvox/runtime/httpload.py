"""The serving load benchmark over HTTP: the listeners of `rtvox.runtime.loadbench`, against a running `rtvox serve`.

The in-process benchmark drives a TTSService directly; this one measures what a user of the server sees, the HTTP
stack, the uvicorn workers and the network path included. Each listener POSTs to the native endpoint `/v1/tts`
(`response_format` pcm, `stream_format` audio, the text's realistic `duration` unless natural durations are asked
for) over its own HTTP/1.1 connection, reads the chunked body as it arrives, and counts an arrival's audio from its
bytes (24 kHz 16-bit mono: 48 000 bytes a second), so time to first audio, per-stream real-time factor and stalls
mean what they mean in the in-process benchmark: a stall is playback, started at the first bytes, running dry.

The clients run in `client_processes` processes (asyncio, no HTTP library: the standard library's streams), so one
client's event loop is not what limits a level of a thousand listeners. The one-at-a-time baseline is one client
sending the same kind of requests back to back, in the same run.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from rtvox.constants import SAMPLE_RATE
from rtvox.errors import InputError
from rtvox.runtime.loadbench import (
    BenchText,
    LevelResult,
    ListenerPlan,
    LoadBenchResult,
    StreamRecord,
    baseline_figures,
    bench_result,
    even_shares,
    level_result,
    make_texts,
    plan_settings,
    stream_record,
)

PCM_BYTES_PER_SECOND = SAMPLE_RATE * 2  # what /v1/tts sends for response_format pcm
READ_LIMIT = 1 << 20  # the largest line or block a stream reader buffers


class HTTPStreamError(Exception):
    """A request that did not end in a complete 200 stream (status, refusal, cut connection)."""


def parse_url(url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an http:// server URL; InputError for anything else."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise InputError(f"server URL must look like http://HOST:PORT, got {url!r}", param="url")
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


def request_body(item: BenchText, realistic_durations: bool, voice: str | None) -> dict[str, Any]:
    """The /v1/tts JSON of one benchmark text (the in-process benchmark's request, as the API spells it)."""
    body: dict[str, Any] = {"text": item.text, "response_format": "pcm", "stream_format": "audio"}
    if realistic_durations:
        body["duration"] = min(max(item.seconds, 0.5), 110.0)
    if voice:
        body["voice"] = voice
    return body


async def post_stream(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str], timeout_s: float = 120.0
) -> tuple[list[float], list[int]]:
    """POST `body` and read the response as it arrives: (arrival times, byte counts) of its body's pieces.

    HTTPStreamError for a status other than 200 (with the server's message), an empty body or a cut stream."""

    async def run() -> tuple[list[float], list[int]]:
        reader, writer = await asyncio.open_connection(host, port, limit=READ_LIMIT)
        try:
            head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
                    "Content-Type: application/json", f"Content-Length: {len(body)}"]  # fmt: skip
            head += [f"{k}: {v}" for k, v in headers.items()]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            status_line = await reader.readline()
            fields = status_line.split()
            if len(fields) < 2 or not fields[1].isdigit():
                raise HTTPStreamError(f"no HTTP status line: {status_line[:80]!r}")
            status = int(fields[1])
            response_headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                response_headers[name.strip().lower()] = value.strip()
            arrivals: list[float] = []
            sizes: list[int] = []
            if status != 200:
                text = (await reader.read(4096)).decode("utf-8", "replace")
                raise HTTPStreamError(f"HTTP {status}: {text[:300]}")
            if "chunked" in response_headers.get("transfer-encoding", ""):
                while True:
                    size_line = await reader.readline()
                    if not size_line:
                        raise HTTPStreamError("the stream was cut before its last chunk")
                    size = int(size_line.split(b";")[0], 16)
                    if size == 0:
                        break
                    await reader.readexactly(size + 2)  # the chunk and its CRLF
                    arrivals.append(time.perf_counter())
                    sizes.append(size)
            else:
                remaining = int(response_headers.get("content-length", "-1"))
                while remaining != 0:
                    data = await reader.read(READ_LIMIT if remaining < 0 else min(READ_LIMIT, remaining))
                    if not data:
                        if remaining > 0:
                            raise HTTPStreamError("the body ended before its Content-Length")
                        break
                    arrivals.append(time.perf_counter())
                    sizes.append(len(data))
                    remaining = remaining - len(data) if remaining > 0 else remaining
            if not sizes:
                raise HTTPStreamError("HTTP 200 with no audio")
            return arrivals, sizes
        finally:
            writer.close()

    return await asyncio.wait_for(run(), timeout_s)


def _record(t0: float, arrivals: list[float], sizes: list[int]) -> StreamRecord:
    return stream_record(t0, arrivals, [size / PCM_BYTES_PER_SECOND for size in sizes])


async def _listeners(
    url: str,
    texts: Sequence[BenchText],
    concurrency: int,
    duration_s: float,
    think_time_s: float,
    realistic_durations: bool,
    seed: Sequence[int],
    listen: bool,
    headers: dict[str, str],
    voice: str | None,
) -> dict[str, Any]:
    """One client process's share of a level: the in-process benchmark's listeners, over HTTP."""
    host, port, prefix = parse_url(url)
    rng = np.random.default_rng(list(seed))
    records: list[StreamRecord] = []
    errors: list[str] = []
    end = time.perf_counter() + duration_s
    plan = ListenerPlan.draw(rng, texts, concurrency, duration_s, think_time_s)

    async def client(index: int) -> None:
        n = 0
        await asyncio.sleep(plan.start_delay(index, listen))
        while time.perf_counter() < end:
            item = plan.text(texts, index, n)
            body = json.dumps(request_body(item, realistic_durations, voice)).encode()
            t0 = time.perf_counter()
            try:
                arrivals, sizes = await post_stream(host, port, prefix + "/v1/tts", body, headers)
            except (HTTPStreamError, OSError, TimeoutError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            else:
                record = _record(t0, arrivals, sizes)
                records.append(record)
                if listen:  # the next request once this one has played out, then a think time
                    await asyncio.sleep(max(0.0, arrivals[0] + record.audio_s - time.perf_counter()))
            n += 1
            if listen:
                await asyncio.sleep(plan.think_s(index, n))

    start = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return {
        "records": [(r.ttfa_s, r.audio_s, r.wall_s, r.stalled, r.timeline) for r in records],
        "errors": errors,
        "wall_s": time.perf_counter() - start,
    }


def _client_process(args: tuple[Any, ...]) -> dict[str, Any]:
    start_at, *rest = args
    time.sleep(max(0.0, start_at - time.time()))  # every client process starts the level at one moment
    return asyncio.run(_listeners(*rest))


def _merge(n: int, parts: Sequence[dict[str, Any]], ttfa_p99_target_s: float) -> tuple[LevelResult, list[str]]:
    records = [StreamRecord(*r) for part in parts for r in part["records"]]
    errors = [e for part in parts for e in part["errors"]]
    wall = max(float(part["wall_s"]) for part in parts)
    return level_result(n, records, len(errors), wall, ttfa_p99_target_s), errors


def run_http_load(
    url: str,
    *,
    levels: Sequence[int] = (1, 2, 4, 8, 12, 16, 24, 32),
    level_duration_s: float = 15.0,
    think_time_s: float = 0.5,
    ttfa_p99_target_s: float = 0.150,
    baseline_requests: int = 20,
    realistic_durations: bool = True,
    saturation_clients: int = 0,
    client_processes: int = 1,
    api_key: str | None = None,
    voice: str | None = None,
    seed: int = 0,
    stop_after_failures: int = 2,
    progress: Callable[[str], None] | None = None,
) -> LoadBenchResult:
    """TTFA, per-stream real-time factor and the largest real-time level of a running server, plus its
    one-at-a-time baseline, in one run (see the module doc). The server's own settings are its business: the
    result records what its /health said."""
    import urllib.request

    host, port, prefix = parse_url(url)
    if client_processes < 1:
        raise InputError(f"client_processes must be at least 1, got {client_processes}", param="client_processes")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    say = progress or (lambda _msg: None)
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{prefix}/health", timeout=10) as response:
            health = json.loads(response.read())
    except OSError as exc:
        raise InputError(f"no rtvox server answers at {url}: {exc}", param="url") from exc
    texts = make_texts(512, seed)

    async def baseline_main() -> dict[str, float]:
        records = []
        start = time.perf_counter()
        for item in texts[:baseline_requests]:
            body = json.dumps(request_body(item, realistic_durations, voice)).encode()
            t0 = time.perf_counter()
            arrivals, sizes = await post_stream(host, port, prefix + "/v1/tts", body, headers)
            records.append(_record(t0, arrivals, sizes))
        return baseline_figures(records, time.perf_counter() - start)

    asyncio.run(baseline_main())  # untimed: first-seen shapes and connections cost nothing below
    baseline = asyncio.run(baseline_main())
    say(f"baseline: {baseline}")
    errors_seen: dict[str, list[str]] = {}
    with multiprocessing.get_context("spawn").Pool(client_processes) as pool:

        def run_level(n: int, listen: bool, index: int) -> LevelResult:
            shares = even_shares(n, client_processes)
            start_at = time.time() + 1.0
            jobs = [
                (
                    start_at,
                    url,
                    texts,
                    share,
                    level_duration_s,
                    think_time_s,
                    realistic_durations,
                    (seed, index, p),
                    listen,
                    headers,
                    voice,
                )
                for p, share in enumerate(shares)
                if share > 0
            ]
            level, errors = _merge(n, pool.map(_client_process, jobs), ttfa_p99_target_s)
            if errors:
                errors_seen[f"{'N' if listen else 'saturation N'}={n}"] = errors[:5]
            say(f"{'N' if listen else 'saturation N'}={n}: {asdict(level)}")
            return level

        results: list[LevelResult] = []
        failures = 0
        for index, n in enumerate(levels):
            level = run_level(n, True, index)
            results.append(level)
            failures = 0 if level.passed else failures + 1
            if failures >= stop_after_failures:
                break
        saturation = run_level(saturation_clients, False, len(levels)) if saturation_clients > 0 else None
    return bench_result(
        machine={
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_1_5_15": list(os.getloadavg()),
            "server": url,
            "server_health": health,
        },
        settings={
            "transport": "http",
            "endpoint": "/v1/tts (pcm, stream_format audio)",
            **plan_settings(
                levels,
                level_duration_s,
                think_time_s,
                ttfa_p99_target_s,
                baseline_requests,
                realistic_durations,
                saturation_clients,
                seed,
            ),
            "client_processes": client_processes,
            "voice": voice,
            "errors": errors_seen,
        },
        baseline=baseline,
        levels=results,
        saturation=saturation,
    )
