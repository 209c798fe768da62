"""The request scheduler: which chunks run together, and when. Pure Python, deterministic, no threads, no tensors.

A loop drives it (see docs at `Scheduler`): add() requests, schedule() batches, hand batches to the executor,
complete() them when the executor is done, expire() requests whose deadline passed, cancel() on disconnect.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
# Weight of the newest batch in the running mean of the time one batch adds to a busy queue's drain.
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

    playback_end: float | None = None  # when the audio delivered so far finishes playing (None: unknown)
    # bumped whenever the record leaves the queues or changes its place in them: heap entries that carry an older
    # version are stale and skipped (lazy deletion)
    version: int = 0
    queued: int | None = None  # the bucket whose queues hold the record while it is eligible

    def eligible(self) -> bool:
        return self.in_flight == 0 and self.next_chunk < len(self.request.chunks)

    @property
    def remaining(self) -> int:
        return len(self.request.chunks) - self.next_chunk

    def sort_key(self, now: float, urgent_slack_s: float) -> tuple[int, int, float, int]:
        # First chunks beat later chunks of other requests (time to first audio), then priority, then FIFO; a
        # later chunk whose stream is about to run dry joins the first class, due when its audio runs out.
        if self.next_chunk == 0:
            return (0, self.request.priority, self.arrival, self.seq)
        if self.playback_end is not None and self.playback_end - now <= urgent_slack_s:
            return (0, self.request.priority, self.playback_end - urgent_slack_s, self.seq)
        return (1, self.request.priority, self.arrival if self.playback_end is None else self.playback_end, self.seq)


_Entry = tuple[Any, ...]  # (*order key, seq, version, state): seq is unique, so a state is never compared


@dataclass
class _BucketQueues:
    """The eligible requests of one length bucket, in heaps with lazy deletion: an entry whose version is not its
    state's current one is stale and dropped when it reaches the top (or at a compaction).

    Batch order is `_RequestState.sort_key`. Each order heap below is sorted consistently with it: first chunks by
    (priority, arrival); later chunks, per priority, by when their stream runs dry (urgency — within `slack` of
    that — only ever holds for a prefix of such a heap); later chunks with no known playback end by arrival. So
    the k most urgent states are a k-way merge of the heaps' tops."""

    count: int = 0  # eligible requests queued here
    firsts: list[_Entry] = field(default_factory=list)  # (priority, arrival, seq, version, state)
    laters: dict[int, list[_Entry]] = field(default_factory=dict)  # priority → (playback_end, seq, version, state)
    unplayed: dict[int, list[_Entry]] = field(default_factory=dict)  # priority → (arrival, seq, version, state)
    ready: list[_Entry] = field(default_factory=list)  # (ready_at, seq, version, state): the oldest waiter
    first_ready: list[_Entry] = field(default_factory=list)  # the same, first chunks only
    entries: int = 0  # heap entries, stale included (compaction trigger)

    def push(self, state: _RequestState) -> None:
        version, seq, priority = state.version, state.seq, state.request.priority
        if state.next_chunk == 0:
            heapq.heappush(self.firsts, (priority, state.arrival, seq, version, state))
            heapq.heappush(self.first_ready, (state.ready_at, seq, version, state))
            self.entries += 1
        elif state.playback_end is not None:
            heapq.heappush(self.laters.setdefault(priority, []), (state.playback_end, seq, version, state))
        else:
            heapq.heappush(self.unplayed.setdefault(priority, []), (state.arrival, seq, version, state))
        heapq.heappush(self.ready, (state.ready_at, seq, version, state))
        self.count += 1
        self.entries += 2
        if self.entries > 4 * self.count + 256:
            self._compact()

    @staticmethod
    def _top(heap: list[_Entry]) -> _RequestState | None:
        while heap and heap[0][-2] != heap[0][-1].version:
            heapq.heappop(heap)
        return heap[0][-1] if heap else None

    def _heaps(self) -> list[list[_Entry]]:
        return [self.firsts, *self.laters.values(), *self.unplayed.values()]

    def ordered(self, now: float, slack: float, limit: int, firsts_only: bool = False) -> list[_RequestState]:
        """The `limit` most urgent queued states (first chunks only, if asked), most urgent first (the heaps are
        left as they were)."""
        heaps = [self.firsts] if firsts_only else self._heaps()
        taken: list[tuple[list[_Entry], _Entry]] = []
        out: list[_RequestState] = []
        while len(out) < limit:
            best: tuple[tuple[int, int, float, int], list[_Entry]] | None = None
            for heap in heaps:
                top = self._top(heap)
                if top is not None:
                    key = top.sort_key(now, slack)
                    if best is None or key < best[0]:
                        best = (key, heap)
            if best is None:
                break
            entry = heapq.heappop(best[1])
            taken.append((best[1], entry))
            out.append(entry[-1])
        for heap, entry in taken:
            heapq.heappush(heap, entry)
        return out

    def oldest_ready(self) -> float:
        top = self._top(self.ready)
        assert top is not None, "oldest_ready of an empty bucket"
        return top.ready_at

    def oldest_first_ready(self) -> float | None:
        top = self._top(self.first_ready)
        return None if top is None else top.ready_at

    def _compact(self) -> None:
        for heap in [*self._heaps(), self.ready, self.first_ready]:
            heap[:] = [e for e in heap if e[-2] == e[-1].version]
            heapq.heapify(heap)
        self.entries = sum(len(h) for h in [*self._heaps(), self.ready, self.first_ready])


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
    Cost: the eligible requests of each bucket sit in heaps (lazy deletion), so schedule() and next_wakeup()
    cost O(buckets + batch size · log live requests), not a scan of every live request: a GPU server holds
    thousands, and the loop calls them after every batch and every arrival.
    """

    def __init__(self, config: SchedulerConfig | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or SchedulerConfig()
        self._clock = clock
        self._live: dict[str, _RequestState] = {}  # request_id → state, only WAITING and RUNNING requests
        self._queues = [_BucketQueues() for _ in self.config.bucket_edges]  # eligible requests per bucket
        self._deadlines: list[tuple[float, int, _RequestState]] = []  # heap of live requests' deadlines
        self._pending = 0  # chunks of live requests not yet scheduled
        # batch_id → (batch, the state record of each item's request) for batches in flight; holding the records
        # lets complete() tell a cancelled request from a new one re-added under the same id.
        self._batches: dict[int, tuple[Batch, tuple[_RequestState, ...]]] = {}
        self._next_batch_id = 0
        self._seq = 0
        self._expired_unreported: list[str] = []  # expired inside schedule(), returned by the next expire()
        # running mean of the seconds each completed batch took off the queue: its own time when nothing else was in
        # flight, the gap since the batch before it completed when batches overlapped (pipelined executors finish
        # one batch per gap, not per batch latency: a latency-based mean quoted 2-3x the real drain)
        self._batch_seconds = _INITIAL_BATCH_SECONDS
        self._last_completed: float | None = None
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
        state = _RequestState(request=request, arrival=arrival, deadline=deadline, seq=self._seq, ready_at=arrival)
        self._live[request.request_id] = state
        self._seq += 1
        self._counts["added"] += 1
        self._pending += state.remaining
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, state.seq, state))
        self._enqueue(state)

    def extend_deadline(self, request_id: str, deadline: float) -> None:
        """Move a live request's deadline later (never earlier); unknown ids and requests without one are left."""
        state = self._live.get(request_id)
        if state is None or state.deadline is None or deadline <= state.deadline:
            return
        state.deadline = deadline
        heapq.heappush(self._deadlines, (deadline, state.seq, state))  # the old entry is skipped when it surfaces

    def retry_after_s(self) -> int:
        """Whole seconds until the chunks now queued have likely drained, at the recent rate of batch completions
        (at least 1)."""
        rounds = math.ceil(self._pending / self.config.max_batch_size)
        return max(1, math.ceil(rounds * self._batch_seconds))

    def cancel(self, request_id: str) -> bool:
        """End a live request now; its queue slot is free at once and its in-flight result will be dropped.

        Returns False if the id is unknown or already ended (so a double cancel is harmless).
        """
        state = self._live.pop(request_id, None)
        if state is None:
            return False
        self._retire(state)
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
        expired: list[_RequestState] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            when, _, state = heapq.heappop(self._deadlines)
            if self._alive(state) and state.deadline == when:  # not ended, not an entry a later deadline replaced
                expired.append(state)
        for state in sorted(expired, key=lambda s: s.seq):  # in the order the requests were added
            del self._live[state.request.request_id]
            self._retire(state)
            state.status = RequestStatus.EXPIRED
            self._counts["expired"] += 1
            self._expired_unreported.append(state.request.request_id)

    # ------------------------------------------------------------------ the per-bucket queues
    def _alive(self, state: _RequestState) -> bool:
        """`state` is still its request's live record (not ended, nor replaced by a re-add under its id)."""
        return self._live.get(state.request.request_id) is state

    def _enqueue(self, state: _RequestState) -> None:
        """Queue an eligible record in the bucket of its next chunk."""
        if not state.eligible():
            return
        bucket = self.config.bucket_of(state.request.chunks[state.next_chunk].phoneme_count)
        state.version += 1
        state.queued = bucket
        self._queues[bucket].push(state)

    def _dequeue(self, state: _RequestState) -> None:
        if state.queued is not None:
            self._queues[state.queued].count -= 1
            state.queued = None
        state.version += 1

    def _retire(self, state: _RequestState) -> None:
        """A live record leaves for good (finished, cancelled, expired)."""
        self._dequeue(state)
        self._pending -= state.remaining

    # ------------------------------------------------------------------ batches out
    def _take(self, states: list[_RequestState]) -> list[_RequestState]:
        """The most urgent states that fit one batch: max_batch_size items within max_batch_phonemes (>= 1); with
        separate_first_chunks, only those of the most urgent one's kind (first chunk or later chunk)."""
        budget = self.config.max_batch_phonemes
        chosen: list[_RequestState] = []
        used = 0
        for state in self._same_kind(states)[: self.config.max_batch_size]:
            size = state.request.chunks[state.next_chunk].phoneme_count
            if chosen and budget is not None and used + size > budget:
                break
            chosen.append(state)
            used += size
        return chosen

    def _same_kind(self, states: list[_RequestState]) -> list[_RequestState]:
        """With separate_first_chunks, the states of the first one's kind (first chunk or later chunk), in order."""
        if not self.config.separate_first_chunks or not states:
            return states
        first = states[0].next_chunk == 0
        return [s for s in states if (s.next_chunk == 0) == first]

    def _release_time(self, queues: _BucketQueues, now: float) -> float:
        """When this bucket may be released: now if a batch is full (items or phonemes), else when its oldest
        item has waited max_wait_s or its oldest first chunk first_chunk_max_wait_s."""
        if queues.count >= self.config.max_batch_size:
            return -math.inf
        if self.config.max_batch_phonemes is not None:
            states = self._same_kind(queues.ordered(now, self.config.urgent_slack_s, queues.count))
            if len(self._take(states)) < len(states):  # the next batch's kind holds more than the budget
                return -math.inf
        release = queues.oldest_ready() + self.config.max_wait_s
        first = self._first_release_time(queues)  # (never the earlier of the two when it waits max_wait_s too)
        return release if first is None else min(release, first)

    def _first_release_time(self, queues: _BucketQueues) -> float | None:
        """When this bucket's first chunks may go as a batch of their own (None: it holds none)."""
        oldest = queues.oldest_first_ready()
        if oldest is None:
            return None
        wait = self.config.first_chunk_max_wait_s
        return oldest + (self.config.max_wait_s if wait is None else wait)

    def schedule(self, now: float | None = None, *, firsts_only: bool = False) -> Batch | None:
        """Release the next batch if one is due (full or waited long enough), else None. `firsts_only`: only a
        batch of first chunks, due once its oldest has waited first_chunk_max_wait_s (max_wait_s if None) — one
        to overtake a preemptible step in progress (rtvox.runtime.preempt)."""
        now = self._clock() if now is None else now
        self._expire(now)
        slack = self.config.urgent_slack_s
        due = []
        for bucket, queues in enumerate(self._queues):
            if not queues.count:
                continue
            if firsts_only:
                release = self._first_release_time(queues)
                if release is not None and release <= now:
                    due.append((queues.ordered(now, slack, 1, firsts_only=True)[0].sort_key(now, slack), bucket))
            elif self._release_time(queues, now) <= now:
                due.append((queues.ordered(now, slack, 1)[0].sort_key(now, slack), bucket))
        if not due:
            return None
        _, bucket = min(due)
        ordered = self._queues[bucket].ordered(now, slack, self.config.max_batch_size, firsts_only=firsts_only)
        chosen = self._take(ordered)
        items: list[BatchItem] = []
        for state in chosen:
            self._dequeue(state)
            index = state.next_chunk
            last = index == len(state.request.chunks) - 1
            items.append(BatchItem(state.request.request_id, index, state.request.chunks[index].phoneme_count, last))
            state.next_chunk += 1
            state.in_flight += 1
            state.status = RequestStatus.RUNNING
            self._pending -= 1
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

    def next_wakeup(self, now: float | None = None, *, firsts_only: bool = False) -> float | None:
        """The earliest time schedule() (with the same `firsts_only`) or expire() could act without a new event;
        None when nothing waits."""
        now = self._clock() if now is None else now
        if firsts_only:
            releases = (self._first_release_time(queues) for queues in self._queues if queues.count)
            times = [t for t in releases if t is not None]
        else:
            times = [self._release_time(queues, now) for queues in self._queues if queues.count]
        while self._deadlines and not (
            self._alive(self._deadlines[0][2]) and self._deadlines[0][2].deadline == self._deadlines[0][0]
        ):
            heapq.heappop(self._deadlines)  # ended requests' deadlines, and those a later one replaced
        if self._deadlines:
            times.append(self._deadlines[0][0])
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
        started = batch.formed_at if self._last_completed is None else max(batch.formed_at, self._last_completed)
        self._batch_seconds += _EWMA_WEIGHT * (max(0.0, now - started) - self._batch_seconds)
        self._last_completed = now
        delivered: list[BatchItem] = []
        dropped: list[BatchItem] = []
        finished: list[str] = []
        seconds = result.audio_seconds
        if seconds is not None and len(seconds) != len(batch.items):
            raise ValueError(f"batch {result.batch_id} has {len(batch.items)} items but {len(seconds)} audio lengths")
        for position, (item, state) in enumerate(zip(batch.items, owners, strict=True)):
            if not self._alive(state):  # cancelled or expired meanwhile (maybe re-added)
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
                self._retire(state)
                state.status = RequestStatus.FINISHED
                self._counts["finished"] += 1
                finished.append(item.request_id)
            else:
                self._enqueue(state)
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
            eligible_chunks=sum(queues.count for queues in self._queues),
            in_flight_batches=len(self._batches),
            batch_size_histogram=dict(sorted(self._histogram.items())),
            added=self._counts["added"],
            rejected=self._counts["rejected"],
            finished=self._counts["finished"],
            cancelled=self._counts["cancelled"],
            expired=self._counts["expired"],
        )
