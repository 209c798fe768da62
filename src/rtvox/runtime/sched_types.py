"""Plain data the scheduler exchanges with its driving loop and the executor. No torch, no numpy, no tensors.

The scheduler decides *what* runs together; the executor owns engines and tensors and decides nothing. They talk
only through these dataclasses, so either side can be tested alone.
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field

from rtvox.constants import MAX_CHUNK_PHONEMES
from rtvox.errors import InputError, RtvoxError

DEFAULT_BUCKET_EDGES: tuple[int, ...] = (16, 32, 64, 128, MAX_CHUNK_PHONEMES)


@dataclass(frozen=True)
class SchedulerConfig:
    """Batching, queueing and deadline limits of one Scheduler."""

    max_batch_size: int = 32  # most chunk work items in one batch (the engines' largest batch profile)
    # Most phonemes in one batch (None: no limit). A batch runs to the end once started, so on a CPU a few long
    # chunks together hold back every new first chunk; a budget keeps each batch short. A chunk larger than the
    # budget still runs, alone.
    max_batch_phonemes: int | None = None
    max_wait_s: float = 0.010  # a partial batch is released once its oldest item has waited this long
    # ... or, when it holds a first chunk (time to first audio), once that has waited this long (None: max_wait_s;
    # 0: a first chunk goes as soon as the engine is free, and first chunks batch while a step runs)
    first_chunk_max_wait_s: float | None = None
    bucket_edges: tuple[int, ...] = DEFAULT_BUCKET_EDGES  # inclusive upper phoneme counts of the length buckets
    max_queue: int = 256  # most live (waiting or running) requests; more are refused with QueueFullError
    default_deadline_s: float | None = None  # per-request time budget from arrival when a request sets none
    # A later chunk whose stream will run out of audio within this many seconds ranks with first chunks, by
    # when it is needed (earliest first); it should cover a batch's service time.
    urgent_slack_s: float = 0.5
    # A batch holds first chunks only or later chunks only (a first chunk beside a long later chunk waits for all
    # of it). Set where steps are preemptible (rtvox.runtime.preempt): batches of first chunks then overtake the
    # step in progress, which only helps if they carry no later chunk.
    separate_first_chunks: bool = False

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {self.max_batch_size}")
        if not math.isfinite(self.max_wait_s) or self.max_wait_s < 0:
            raise ValueError(f"max_wait_s must be a finite number ≥ 0, got {self.max_wait_s}")
        first = self.first_chunk_max_wait_s
        if first is not None and (not math.isfinite(first) or first < 0):
            raise ValueError(f"first_chunk_max_wait_s must be a finite number ≥ 0 or None, got {first}")
        edges = self.bucket_edges
        if not edges or edges[0] < 1 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ValueError(f"bucket_edges must be positive and strictly increasing, got {edges}")
        if self.max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, got {self.max_queue}")
        if self.default_deadline_s is not None and not self.default_deadline_s > 0:
            raise ValueError(f"default_deadline_s must be > 0 or None, got {self.default_deadline_s}")
        if self.max_batch_phonemes is not None and self.max_batch_phonemes < 1:
            raise ValueError(f"max_batch_phonemes must be at least 1 or None, got {self.max_batch_phonemes}")
        if not math.isfinite(self.urgent_slack_s) or self.urgent_slack_s < 0:
            raise ValueError(f"urgent_slack_s must be a finite number ≥ 0, got {self.urgent_slack_s}")

    def bucket_of(self, phoneme_count: int) -> int:
        """Index of the smallest bucket whose edge holds `phoneme_count`."""
        for index, edge in enumerate(self.bucket_edges):
            if phoneme_count <= edge:
                return index
        raise InputError(
            f"a chunk of {phoneme_count} phonemes is longer than the largest the engines take "
            f"({self.bucket_edges[-1]}): a single word that long cannot be spoken; break it into shorter words",
            param="input",
        )


class RequestStatus(enum.Enum):
    """Life cycle of a request inside the scheduler. The last three are terminal."""

    WAITING = "waiting"  # added, no chunk scheduled yet
    RUNNING = "running"  # at least one chunk scheduled, not all done
    FINISHED = "finished"  # every chunk completed and delivered
    CANCELLED = "cancelled"  # the caller gave up (client gone, executor error)
    EXPIRED = "expired"  # its deadline passed before its last chunk completed


@dataclass(frozen=True)
class ChunkWork:
    """One chunk of a request's text, as the scheduler sees it: only its size."""

    phoneme_count: int  # phonemes in the chunk, boundary tokens included; picks the length bucket


@dataclass(frozen=True)
class SchedRequest:
    """A request already split into chunks by the frontend; the executor keeps the text and tensors."""

    request_id: str  # unique among live requests; the key the executor uses for its own per-request state
    chunks: tuple[ChunkWork, ...]  # in stream order; chunk k's audio is sent before chunk k+1's
    priority: int = 0  # lower runs sooner (like nice); ties go first-come first-served
    arrival: float | None = None  # clock time the request arrived; None → the scheduler's clock at add()
    deadline: float | None = None  # absolute clock time after which it expires; None → arrival + config default

    def __post_init__(self) -> None:
        if not self.chunks:
            raise ValueError(f"request {self.request_id!r} has no chunks; the frontend found nothing to speak")
        object.__setattr__(self, "chunks", tuple(self.chunks))
        if any(c.phoneme_count < 1 for c in self.chunks):
            raise ValueError(f"request {self.request_id!r} has an empty chunk (phoneme_count < 1)")


@dataclass(frozen=True)
class BatchItem:
    """One chunk to run: which request, which chunk, how big."""

    request_id: str  # the request the chunk belongs to
    chunk_index: int  # 0-based position of the chunk in its request
    phoneme_count: int  # the chunk's length (≤ the batch's bucket edge)
    is_last: bool  # True for the request's final chunk (the executor marks AudioChunk.is_last)


@dataclass(frozen=True)
class Batch:
    """Chunks the executor runs as one batched engine call; all fall in the same length bucket."""

    batch_id: int  # increasing from 0; passed back in BatchResult
    bucket: int  # index into SchedulerConfig.bucket_edges
    bucket_edge: int  # the bucket's phoneme limit: the padded length for static-shape engines
    items: tuple[BatchItem, ...]  # highest priority first; at most max_batch_size, at most one per request
    formed_at: float  # clock time the batch was released


@dataclass(frozen=True)
class BatchResult:
    """The executor's report that every item of a batch has run (success or not: see Scheduler.complete)."""

    batch_id: int  # the Batch.batch_id this result answers
    # Audio seconds each item produced, aligned with Batch.items (None: unknown). With it the scheduler knows
    # when each stream's buffered audio runs out and can run a later chunk ahead of new first chunks in time.
    audio_seconds: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Completion:
    """What complete() changed, so the caller can route audio and close streams."""

    delivered: tuple[BatchItem, ...]  # items whose request is still live: send their audio, in this order
    dropped: tuple[BatchItem, ...]  # items whose request was cancelled or expired meanwhile: discard them
    finished: tuple[str, ...]  # requests whose last chunk was just delivered: close their streams


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot for metrics and the /health endpoint."""

    queue_depth: int  # live requests with no chunk scheduled yet (RequestStatus.WAITING)
    running: int  # live requests with at least one chunk scheduled (RequestStatus.RUNNING)
    eligible_chunks: int  # chunks that could go into the next batch now
    in_flight_batches: int  # batches released and not yet completed
    batch_size_histogram: dict[int, int] = field(default_factory=dict)  # batch size → batches released
    added: int = 0  # requests accepted since start
    rejected: int = 0  # requests refused with QueueFullError
    finished: int = 0  # requests that reached FINISHED
    cancelled: int = 0  # requests that reached CANCELLED
    expired: int = 0  # requests that reached EXPIRED


class QueueFullError(RtvoxError):
    """The scheduler already holds max_queue live requests (HTTP 503 with a Retry-After header)."""

    retry_after_s: int  # whole seconds, as the Retry-After header wants

    def __init__(self, retry_after_s: int, *, queued: int, limit: int) -> None:
        super().__init__(f"the server is busy ({queued} requests queued, limit {limit}); retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class DeadlineExceededError(RtvoxError):
    """A request's deadline passed before its last chunk was delivered (HTTP 504); its slots are already freed."""

    def __init__(self, deadline_s: float | None) -> None:
        budget = "its deadline" if deadline_s is None else f"its deadline of {deadline_s:g} s"
        super().__init__(f"the request did not finish within {budget}; shorten the text or allow a longer deadline")
        self.deadline_s = deadline_s


class ServiceUnavailableError(RtvoxError):
    """The service is not running (not started, or stopping) (HTTP 503)."""


class EngineFailedError(RtvoxError):
    """The engines failed and no fallback could serve the request (HTTP 500); the engines are being rebuilt."""
