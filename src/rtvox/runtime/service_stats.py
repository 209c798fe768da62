"""Counters the service keeps for /metrics and /health: request outcomes, time to first audio, fallback use.

Plain Python, updated from the event loop only (no locks needed). TTFA is kept both as cumulative histogram
buckets (what Prometheus wants) and as a window of recent samples (for quick percentiles in health and benches).
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

import numpy as np

# Upper bounds (seconds) of the TTFA histogram buckets; +Inf is implied.
TTFA_BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECENT_SAMPLES = 2048  # TTFA samples kept for percentiles

OUTCOMES: tuple[str, ...] = (
    "ok",  # every chunk delivered
    "cancelled",  # the caller closed the stream early (disconnect, aclose, task cancelled)
    "expired",  # the deadline passed
    "rejected",  # refused at admission: queue full (QueueFullError)
    "invalid",  # bad input (InputError / TextError), including limits
    "failed",  # every engine failed (EngineFailedError) or the service stopped under it
)


class ServiceStats:
    """Owns the service's counters; `snapshot()` returns a JSON-able dict."""

    def __init__(self) -> None:
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self._ttfa_counts = [0] * (len(TTFA_BUCKETS_S) + 1)  # per bucket, not cumulative; last = +Inf
        self._ttfa_sum = 0.0
        self._recent: deque[float] = deque(maxlen=RECENT_SAMPLES)
        self.audio_seconds = 0.0  # audio delivered to callers
        self.chunks = 0  # chunks delivered to callers

    def outcome(self, name: str) -> None:
        assert name in self.outcomes, name
        self.outcomes[name] += 1

    def ttfa(self, seconds: float) -> None:
        self._ttfa_counts[bisect.bisect_left(TTFA_BUCKETS_S, seconds)] += 1
        self._ttfa_sum += seconds
        self._recent.append(seconds)

    def delivered(self, audio_seconds: float) -> None:
        self.chunks += 1
        self.audio_seconds += audio_seconds

    def ttfa_snapshot(self) -> dict[str, Any]:
        cumulative, running = {}, 0
        for edge, count in zip((*TTFA_BUCKETS_S, float("inf")), self._ttfa_counts, strict=True):
            running += count
            cumulative["+Inf" if edge == float("inf") else f"{edge:g}"] = running
        recent = np.asarray(self._recent, dtype=np.float64)
        return {
            "count": running,
            "sum_s": self._ttfa_sum,
            "buckets": cumulative,  # le → requests whose TTFA was <= le seconds (cumulative, Prometheus style)
            "recent_p50_s": float(np.percentile(recent, 50)) if recent.size else None,
            "recent_p99_s": float(np.percentile(recent, 99)) if recent.size else None,
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": dict(self.outcomes),
            "chunks_delivered": self.chunks,
            "audio_seconds_delivered": self.audio_seconds,
            "ttfa": self.ttfa_snapshot(),
        }
