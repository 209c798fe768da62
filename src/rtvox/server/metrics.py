"""Prometheus metrics: request counts by status, time to first audio, total latency, and runtime gauges
(queue depth, batch sizes, embedding-cache hit rate, device memory) read from the service at scrape time.

Each app owns its own CollectorRegistry, so several apps (tests) never share counters. Under `rtvox serve
--workers N` (PROMETHEUS_MULTIPROC_DIR set) a scrape answered by any worker covers all of them: the request
instruments through prometheus_client's multiprocess files, the runtime figures through a snapshot each worker
writes beside them every second (and at each scrape it answers), summed over the workers that are alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# prometheus_client's switch to multiprocess values (read when it is first imported): set for server workers
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
SNAPSHOT_PREFIX = "rtvox-runtime-"
SNAPSHOT_PERIOD_S = 1.0
SNAPSHOT_STALE_S = 30.0  # a snapshot this old is from a worker that stopped publishing: left out
# Speech latency buckets: TTFA targets are tens of milliseconds on a GPU, whole requests run to seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


# Methods counted under their own label; anything else a client sends is counted as "other".
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """Owns the registry and the request-level instruments the routes and the middleware update."""

    def __init__(
        self,
        stats: Callable[[], Mapping[str, Any]],
        cache_stats: Callable[[], Mapping[str, Any]],
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        disable_created_metrics()  # process-wide: the *_created series only double the scrape size
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "rtvox_http_requests", "HTTP requests by route and status", ["method", "route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.request_seconds = Histogram(
            "rtvox_http_request_duration_seconds", "Time from request start to the last response byte", ["route"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.ttfa = Histogram(
            "rtvox_time_to_first_audio_seconds", "Time from request start to the first audio chunk", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.synthesis_seconds = Histogram(
            "rtvox_synthesis_duration_seconds", "Time from request start to the last audio chunk", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.audio_seconds = Counter(
            "rtvox_audio_generated_seconds", "Seconds of audio sent", ["endpoint"], registry=self.registry
        )
        self.shared_dir = os.environ.get(METRICS_DIR_ENV) or None
        self.runtime = RuntimeCollector(stats, cache_stats, self.shared_dir, ready)
        self.registry.register(self.runtime)

    def exposition(self) -> bytes:
        if self.shared_dir is None:
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.shared_dir)  # every worker's request instruments, summed
        registry.register(self.runtime)
        return generate_latest(registry)

    async def publish(self) -> None:
        """Under workers: write this worker's runtime snapshot every SNAPSHOT_PERIOD_S until cancelled."""
        import asyncio

        while self.shared_dir is not None:
            self.runtime.publish()
            await asyncio.sleep(SNAPSHOT_PERIOD_S)

    def retire(self) -> None:
        """This worker stops: its snapshot goes (its multiprocess counter files stay, as counters must)."""
        if self.runtime.snapshot_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.runtime.snapshot_path)


class RuntimeCollector(Collector):
    """Reads the runtime's stats at scrape time: nothing to keep in sync, nothing stale. With a shared folder
    (server workers) the figures are the sum of every live worker's latest snapshot, this one's read afresh."""

    def __init__(
        self,
        stats: Callable[[], Mapping[str, Any]],
        cache_stats: Callable[[], Mapping[str, Any]],
        shared_dir: str | None = None,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self._stats = stats
        self._cache_stats = cache_stats
        self._ready = ready
        self.shared_dir = shared_dir
        # where this worker's snapshot goes (server workers only)
        self.snapshot_path = os.path.join(shared_dir, f"{SNAPSHOT_PREFIX}{os.getpid()}.json") if shared_dir else None

    def snapshot(self) -> dict[str, Any]:
        """This process's figures as plain JSON-able values."""
        stats = dict(self._stats())
        if not isinstance(stats.get("cache"), Mapping):
            stats["cache"] = dict(self._cache_stats())
        memory = {"|".join(k): v for k, v in _memory_samples()}
        return {"stats": _plain(stats), "memory": memory, "ready": bool(self._ready())}

    def publish(self) -> dict[str, Any]:
        snap = self.snapshot()
        if self.snapshot_path is not None:
            tmp = f"{self.snapshot_path}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"pid": os.getpid(), "time": time.time(), **snap}, fh)
            os.replace(tmp, self.snapshot_path)  # readers see a whole snapshot or the last one
        return snap

    def workers_ready(self) -> tuple[int, int]:
        """(workers ready, workers alive) over this one (read afresh) and every live peer's latest snapshot; (1, 1)
        or (0, 1) outside server workers."""
        snaps = self._live_snapshots() if self.shared_dir is not None else [self.snapshot()]
        return sum(bool(s.get("ready")) for s in snaps), len(snaps)

    def _merged(self) -> dict[str, Any]:
        snaps = self._live_snapshots()
        merged = _sum_trees([s["stats"] for s in snaps])
        merged["workers"] = len(snaps)
        memory = _sum_trees([s["memory"] for s in snaps])
        return {"stats": merged, "memory": memory}

    def _live_snapshots(self) -> list[dict[str, Any]]:
        """This worker's snapshot (published afresh) and every other live worker's latest one."""
        own = self.publish()
        assert self.shared_dir is not None
        snaps = [own]
        now = time.time()
        for name in os.listdir(self.shared_dir):
            if not (name.startswith(SNAPSHOT_PREFIX) and name.endswith(".json")):
                continue
            path = os.path.join(self.shared_dir, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    snap = json.load(fh)
                pid = int(snap["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # half-gone or foreign: skip it
            if pid == os.getpid() or now - float(snap.get("time", 0)) > SNAPSHOT_STALE_S or not _alive(pid):
                continue
            snaps.append(snap)
        return snaps

    def collect(self) -> Iterator[Metric]:
        if self.shared_dir is None:
            stats = dict(self._stats())
            memory = list(_memory_samples())
        else:
            merged = self._merged()
            stats = merged["stats"]
            memory = [(tuple(key.split("|")), value) for key, value in merged["memory"].items()]
            yield GaugeMetricFamily("rtvox_workers", "Server worker processes reporting", value=stats["workers"])
        for key, help_text in (
            ("queue_depth", "Requests waiting for their first chunk to be scheduled"),
            ("running", "Requests with chunks in progress"),
            ("admitted", "Requests admitted and not yet finished (the queue limit counts these)"),
        ):
            if isinstance(stats.get(key), int | float):
                yield GaugeMetricFamily(f"rtvox_{key}", help_text, value=float(stats[key]))
        outcomes = stats.get("requests")
        if isinstance(outcomes, Mapping):
            family = CounterMetricFamily("rtvox_service_requests", "Runtime requests by outcome", labels=["outcome"])
            for outcome, count in outcomes.items():
                family.add_metric([str(outcome)], float(count))
            yield family
        histogram = stats.get("batch_size_histogram")
        if isinstance(histogram, Mapping):
            yield _batch_histogram(histogram)
        cache = stats.get("cache")
        yield from _cache_metrics(cache if isinstance(cache, Mapping) else self._cache_stats())
        gauge = GaugeMetricFamily("rtvox_device_memory_bytes", "Memory in use per device", labels=["device", "kind"])
        for labels, value in memory:
            gauge.add_metric(list(labels), value)
        yield gauge


def _batch_histogram(counts: Mapping[Any, Any]) -> HistogramMetricFamily:
    sizes = sorted((int(size), int(n)) for size, n in counts.items())
    edges = [1, 2, 4, 8, 16, 32, 64]
    buckets = [(str(edge), float(sum(n for s, n in sizes if s <= edge))) for edge in edges]
    total = sum(n for _, n in sizes)
    buckets.append(("+Inf", float(total)))
    family = HistogramMetricFamily("rtvox_batch_size", "Chunks per batched engine call")
    family.add_metric([], buckets, sum_value=float(sum(s * n for s, n in sizes)))
    return family


def _cache_metrics(stats: Mapping[str, Any]) -> Iterator[Metric]:
    lookups = CounterMetricFamily("rtvox_embedding_cache_lookups", "Embedding-cache lookups", labels=["tier", "result"])
    hits = misses = 0
    for tier in ("local", "redis"):
        counts = stats.get(tier) or {}
        for key, result in (("hits", "hit"), ("misses", "miss")):
            lookups.add_metric([tier, result], int(counts.get(key, 0)))
        if tier == "local":
            hits += int(counts.get("hits", 0))
            misses += int(counts.get("misses", 0))
        else:  # a local miss answered by Redis is a hit overall
            hits += int(counts.get("hits", 0))
            misses -= int(counts.get("hits", 0))
    yield lookups
    ratio = hits / (hits + misses) if hits + misses > 0 else 0.0
    yield GaugeMetricFamily("rtvox_embedding_cache_hit_ratio", "Share of embedding lookups served from a cache", ratio)


def _memory_samples() -> Iterator[tuple[tuple[str, str], float]]:
    """((device, kind), bytes) of this process: its resident memory, and each GPU's allocated and reserved."""
    try:
        with open("/proc/self/statm") as statm:
            yield ("cpu", "rss"), float(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        pass  # not Linux: no RSS figure
    import torch

    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            name = f"cuda:{index}"
            yield (name, "allocated"), float(torch.cuda.memory_allocated(index))
            yield (name, "reserved"), float(torch.cuda.memory_reserved(index))


def _plain(value: Any) -> Any:
    """Mappings with string keys and numbers, as JSON carries them (a histogram's int keys become strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _sum_trees(trees: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Numbers at the same key path summed over the trees (several workers' figures); other values: the first."""
    out: dict[str, Any] = {}
    for tree in trees:
        for key, value in tree.items():
            have = out.get(key)
            if isinstance(value, Mapping):
                out[key] = _sum_trees([have, value] if isinstance(have, Mapping) else [value])
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = (have if isinstance(have, int | float) and not isinstance(have, bool) else 0) + value
            elif key not in out:
                out[key] = value
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MetricsMiddleware:
    """Pure ASGI (no buffering, so streamed audio leaves as it is made): counts every HTTP response by status."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes  # to label responses given before routing (a 413 from the body limit) by their route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # an exception before the response started ends as a 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route") or self._route_of(scope), "path", None) or "unmatched"
            method = scope.get("method", "")  # a client picks any method string: keep the label set bounded
            method = method if method in HTTP_METHODS else "other"
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(time.perf_counter() - start)

    def _route_of(self, scope: Scope) -> BaseRoute | None:
        for route in self.routes:
            if route.matches(scope)[0] != Match.NONE:
                return route
        return None
