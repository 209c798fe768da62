"""Prometheus metrics: request counts by status, time to first audio, total latency, and runtime gauges
(queue depth, batch sizes, embedding-cache hit rate, device memory) read from the service at scrape time.

Each app owns its own CollectorRegistry, so several apps (tests) never share counters.
"""

from __future__ import annotations

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
# Speech latency buckets: TTFA targets are tens of milliseconds on a GPU, whole requests run to seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


# Methods counted under their own label; anything else a client sends is counted as "other".
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """Owns the registry and the request-level instruments the routes and the middleware update."""

    def __init__(self, stats: Callable[[], Mapping[str, Any]], cache_stats: Callable[[], Mapping[str, Any]]) -> None:
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
        self.registry.register(RuntimeCollector(stats, cache_stats))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class RuntimeCollector(Collector):
    """Reads the runtime's stats at scrape time: nothing to keep in sync, nothing stale."""

    def __init__(self, stats: Callable[[], Mapping[str, Any]], cache_stats: Callable[[], Mapping[str, Any]]) -> None:
        self._stats = stats
        self._cache_stats = cache_stats

    def collect(self) -> Iterator[Metric]:
        stats = dict(self._stats())
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
        yield from _memory_metrics()


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


def _memory_metrics() -> Iterator[Metric]:
    family = GaugeMetricFamily("rtvox_device_memory_bytes", "Memory in use per device", labels=["device", "kind"])
    try:
        with open("/proc/self/statm") as statm:
            family.add_metric(["cpu", "rss"], float(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")))
    except (OSError, ValueError, IndexError):
        pass  # not Linux: no RSS figure
    import torch

    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            name = f"cuda:{index}"
            family.add_metric([name, "allocated"], float(torch.cuda.memory_allocated(index)))
            family.add_metric([name, "reserved"], float(torch.cuda.memory_reserved(index)))
    yield family


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
