"""The request scheduler: which chunks run together, and when. Pure Python, deterministic, no threads, no tensors.

A loop drives it (see docs at `Scheduler`): add() requests, schedule() batches, hand batches to the executor,
complete() them when the executor is done, expire() requests whose deadline passed, cancel() on disconnect.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from rtvox.runtime.sched_types import (
    Batch,
    BatchItem,
    BatchResult,
    ChunkWork,
    Completion,
    QueueFullError,
    RequestStatus,
    SchedRequest,
    SchedulerConfig,
    SchedulerStats,
)

__all__ = [
    "Batch",
    "BatchItem",
    "BatchResult",
    "ChunkWork",
    "Completion",
    "QueueFullError",
    "RequestStatus",
    "SchedRequest",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStats",
]

# Before any batch has completed we have no service time to quote; assume this per batch for Retry-After.
_INITIAL_BATCH_SECONDS = 0.1
# Weight of the newest batch in the running mean of batch service time.
_EWMA_WEIGHT = 0.2


@dataclass
class _RequestState:
    """The scheduler's mutable record of one live request."""

    request: SchedRequest  # as added
    arrival: float  # resolved arrival time
    deadline: float | None  # resolved absolute deadline
    seq: int  # add order; the last FIFO tie-breaker
    status: RequestStatus = RequestStatus.WAITING  # WAITING or RUNNING while the record exists
    next_chunk: int = 0  # index of the next chunk to schedule
    in_flight: int = 0  # chunks scheduled and not yet completed (0 or 1: no pipelining within a request)
    ready_at: float = 0.0  # when the next chunk became eligible (arrival, or the previous chunk's completion)

    def eligible(self) -> bool:
        return self.in_flight == 0 and self.next_chunk < len(self.request.chunks)

    playback_end: float | None = None  # when the audio delivered so far finishes playing (None: unknown)

    def sort_key(self, now: float, urgent_slack_s: float) -> tuple[int, int, float, int]:
        # First chunks beat later chunks of other requests (time to first audio), then priority, then FIFO; a
        # later chunk whose stream is about to run dry joins the first class, due when its audio runs out.
        if self.next_chunk == 0:
            return (0, self.request.priority, self.arrival, self.seq)
        if self.playback_end is not None and self.playback_end - now <= urgent_slack_s:
            return (0, self.request.priority, self.playback_end - urgent_slack_s, self.seq)
        return (1, self.request.priority, self.arrival if self.playback_end is None else self.playback_end, self.seq)


class Scheduler:
    """Owns the request queue, per-request progress, batch formation, deadlines and back-pressure.

    It owns no tensors and runs nothing: it returns `Batch` descriptions and learns results through `complete()`.
    Rules:
    - a batch holds chunks of one length bucket only (less padding), at most `max_batch_size` of them;
    - a batch is released when full, or when its oldest item has waited `max_wait_s`; otherwise `schedule()`
      returns None and `next_wakeup()` says when to call again;
    - order within a bucket: every request's first chunk before other requests' later chunks, then
      `priority` (lower first), then arrival; when several buckets can be released, the one holding the most
      urgent item goes first;
    - at most one chunk of a request is in flight, so chunk k+1 is scheduled only after chunk k completed
      (streamed audio stays in order without reordering buffers; the cost is one batch round trip per chunk);
    - every request ends exactly once, reported by the call that ended it: `complete()` (finished),
      `cancel()` (True), or `expire()` (expired, including those expired inside `schedule()`).
    Known limit: under sustained overload, new first chunks can delay later chunks until their deadline;
    the bounded queue (QueueFullError) is what keeps load below that point.
    Cost: each schedule() scans the live requests (≤ max_queue), fine at hundreds per batch.
    """

    def __init__(self, config: SchedulerConfig | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or SchedulerConfig()
        self._clock = clock
        self._live: dict[str, _RequestState] = {}  # request_id → state, only WAITING and RUNNING requests
        # batch_id → (batch, the state record of each item's request) for batches in flight; holding the records
        # lets complete() tell a cancelled request from a new one re-added under the same id.
        self._batches: dict[int, tuple[Batch, tuple[_RequestState, ...]]] = {}
        self._next_batch_id = 0
        self._seq = 0
        self._expired_unreported: list[str] = []  # expired inside schedule(), returned by the next expire()
        self._batch_seconds = _INITIAL_BATCH_SECONDS  # running mean of batch service time
        self._histogram: dict[int, int] = {}
        self._counts = {"added": 0, "rejected": 0, "finished": 0, "cancelled": 0, "expired": 0}

    # ------------------------------------------------------------------ requests in
    def add(self, request: SchedRequest) -> None:
        """Queue a request. Raises QueueFullError when max_queue requests are live, ValueError on bad input."""
        if request.request_id in self._live:
            raise ValueError(f"request id {request.request_id!r} is already queued; ids must be unique")
        for chunk in request.chunks:
            self.config.bucket_of(chunk.phoneme_count)  # raises ValueError for a chunk no bucket can hold
        if len(self._live) >= self.config.max_queue:
            self._counts["rejected"] += 1
            raise QueueFullError(self.retry_after_s(), queued=len(self._live), limit=self.config.max_queue)
        arrival = self._clock() if request.arrival is None else request.arrival
        deadline = request.deadline
        if deadline is None and self.config.default_deadline_s is not None:
            deadline = arrival + self.config.default_deadline_s
        self._live[request.request_id] = _RequestState(
            request=request, arrival=arrival, deadline=deadline, seq=self._seq, ready_at=arrival
        )
        self._seq += 1
        self._counts["added"] += 1

    def retry_after_s(self) -> int:
        """Whole seconds until the queue has likely drained a batch's worth of work (at least 1)."""
        pending = sum(len(s.request.chunks) - s.next_chunk for s in self._live.values())
        rounds = math.ceil(pending / self.config.max_batch_size)
        return max(1, math.ceil(rounds * self._batch_seconds))

    def cancel(self, request_id: str) -> bool:
        """End a live request now; its queue slot is free at once and its in-flight result will be dropped.

        Returns False if the id is unknown or already ended (so a double cancel is harmless).
        """
        state = self._live.pop(request_id, None)
        if state is None:
            return False
        state.status = RequestStatus.CANCELLED
        self._counts["cancelled"] += 1
        return True

    def expire(self, now: float | None = None) -> list[str]:
        """Expire live requests whose deadline is ≤ now; return them and any expired inside schedule().

        Each id is returned once: the caller sends it a timeout error.
        """
        now = self._clock() if now is None else now
        self._expire(now)
        reported, self._expired_unreported = self._expired_unreported, []
        return reported

    def _expire(self, now: float) -> None:
        for request_id, state in list(self._live.items()):
            if state.deadline is not None and state.deadline <= now:
                del self._live[request_id]
                state.status = RequestStatus.EXPIRED
                self._counts["expired"] += 1
                self._expired_unreported.append(request_id)

    # ------------------------------------------------------------------ batches out
    def _buckets(self, now: float) -> dict[int, list[_RequestState]]:
        """Eligible requests per bucket of their next chunk, most urgent first."""
        buckets: dict[int, list[_RequestState]] = {}
        for state in self._live.values():
            if state.eligible():
                bucket = self.config.bucket_of(state.request.chunks[state.next_chunk].phoneme_count)
                buckets.setdefault(bucket, []).append(state)
        for states in buckets.values():
            states.sort(key=lambda s: s.sort_key(now, self.config.urgent_slack_s))
        return buckets

    def _take(self, states: list[_RequestState]) -> list[_RequestState]:
        """The most urgent states that fit one batch: max_batch_size items within max_batch_phonemes (>= 1)."""
        budget = self.config.max_batch_phonemes
        chosen: list[_RequestState] = []
        used = 0
        for state in states[: self.config.max_batch_size]:
            size = state.request.chunks[state.next_chunk].phoneme_count
            if chosen and budget is not None and used + size > budget:
                break
            chosen.append(state)
            used += size
        return chosen

    def _release_time(self, states: list[_RequestState]) -> float:
        """When this bucket may be released: now if a batch is full (items or phonemes), else when its oldest
        item has waited max_wait_s or its oldest first chunk first_chunk_max_wait_s."""
        if len(self._take(states)) < len(states) or len(states) >= self.config.max_batch_size:
            return -math.inf
        release = min(s.ready_at for s in states) + self.config.max_wait_s
        first_wait = self.config.first_chunk_max_wait_s
        if first_wait is not None:
            firsts = [s.ready_at + first_wait for s in states if s.next_chunk == 0]
            release = min([release, *firsts])
        return release

    def schedule(self, now: float | None = None) -> Batch | None:
        """Release the next batch if one is due (full or waited long enough), else None."""
        now = self._clock() if now is None else now
        self._expire(now)
        slack = self.config.urgent_slack_s
        due = [(states[0].sort_key(now, slack), bucket, states) for bucket, states in self._buckets(now).items()]
        due = [entry for entry in due if self._release_time(entry[2]) <= now]
        if not due:
            return None
        _, bucket, states = min(due, key=lambda entry: entry[0])
        chosen = self._take(states)
        items: list[BatchItem] = []
        for state in chosen:
            index = state.next_chunk
            last = index == len(state.request.chunks) - 1
            items.append(BatchItem(state.request.request_id, index, state.request.chunks[index].phoneme_count, last))
            state.next_chunk += 1
            state.in_flight += 1
            state.status = RequestStatus.RUNNING
        batch = Batch(
            batch_id=self._next_batch_id,
            bucket=bucket,
            bucket_edge=self.config.bucket_edges[bucket],
            items=tuple(items),
            formed_at=now,
        )
        self._next_batch_id += 1
        self._batches[batch.batch_id] = (batch, tuple(chosen))
        self._histogram[len(items)] = self._histogram.get(len(items), 0) + 1
        return batch

    def next_wakeup(self, now: float | None = None) -> float | None:
        """The earliest time schedule() or expire() could act without a new event; None when nothing waits."""
        now = self._clock() if now is None else now
        times = [self._release_time(states) for states in self._buckets(now).values()]
        times += [s.deadline for s in self._live.values() if s.deadline is not None]
        if not times:
            return None
        return max(now, min(times))

    # ------------------------------------------------------------------ results in
    def complete(self, result: BatchResult) -> Completion:
        """Mark every item of a batch done and advance its requests.

        The executor reports per-request failures by cancel()ing those requests first; their items are dropped.
        """
        entry = self._batches.pop(result.batch_id, None)
        if entry is None:
            raise ValueError(f"batch {result.batch_id} is unknown or already completed")
        batch, owners = entry
        now = self._clock()
        self._batch_seconds += _EWMA_WEIGHT * (max(0.0, now - batch.formed_at) - self._batch_seconds)
        delivered: list[BatchItem] = []
        dropped: list[BatchItem] = []
        finished: list[str] = []
        seconds = result.audio_seconds
        if seconds is not None and len(seconds) != len(batch.items):
            raise ValueError(f"batch {result.batch_id} has {len(batch.items)} items but {len(seconds)} audio lengths")
        for position, (item, state) in enumerate(zip(batch.items, owners, strict=True)):
            if self._live.get(item.request_id) is not state:  # cancelled or expired meanwhile (maybe re-added)
                dropped.append(item)
                continue
            assert state.in_flight == 1 and state.next_chunk == item.chunk_index + 1
            state.in_flight -= 1
            state.ready_at = now
            if seconds is not None:  # playback starts (or resumes after a stall) when audio arrives
                state.playback_end = max(now, state.playback_end or now) + seconds[position]
            delivered.append(item)
            if state.next_chunk == len(state.request.chunks):
                del self._live[item.request_id]
                state.status = RequestStatus.FINISHED
                self._counts["finished"] += 1
                finished.append(item.request_id)
        return Completion(delivered=tuple(delivered), dropped=tuple(dropped), finished=tuple(finished))

    # ------------------------------------------------------------------ introspection
    def status(self, request_id: str) -> RequestStatus | None:
        """WAITING or RUNNING for a live request; None once it ended (the call that ended it reported that)."""
        state = self._live.get(request_id)
        return None if state is None else state.status

    def stats(self) -> SchedulerStats:
        waiting = sum(1 for s in self._live.values() if s.status is RequestStatus.WAITING)
        return SchedulerStats(
            queue_depth=waiting,
            running=len(self._live) - waiting,
            eligible_chunks=sum(1 for s in self._live.values() if s.eligible()),
            in_flight_batches=len(self._batches),
            batch_size_histogram=dict(sorted(self._histogram.items())),
            added=self._counts["added"],
            rejected=self._counts["rejected"],
            finished=self._counts["finished"],
            cancelled=self._counts["cancelled"],
            expired=self._counts["expired"],
        )
