"""TTSService: many concurrent streaming requests over one set of engines, batched, bounded and fault tolerant.

    stream(request) ─admission (limits, queue)─► prepare on the engine thread (frontend, condition)
        ─► Scheduler.add (chunks) ── loop: Scheduler.schedule → Executor.run(batch) → Scheduler.complete ──►
        per-request asyncio queue ─► AudioChunk to the caller as soon as its chunk is vocoded

The scheduler (plain data) decides which chunks run together: one length bucket per batch, up to `max_batch`,
released when full or when its oldest chunk has waited `max_wait_ms`, every request's first chunk ahead of later
chunks. The executor owns the engines and threads and re-runs a failed step on the fallback. This module owns
the event-loop side: admission, per-request streams, deadlines and cancellation, and the health/stats views.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtvox.constants import (
    FIRST_CHUNK_PHONEMES,
    MAX_CHUNK_PHONEMES,
    MAX_INPUT_CHARS,
    MIN_FIRST_CHUNK_PHONEMES,
    PREEMPT_CHUNK_PHONEMES,
    SAMPLE_RATE,
)
from rtvox.engines.base import resolve_device
from rtvox.errors import InputError, TextError
from rtvox.runtime.cache import EmbeddingCache
from rtvox.runtime.engine_process import EngineProcess
from rtvox.runtime.executor import Executor, StepRunner
from rtvox.runtime.sched_types import (
    DEFAULT_BUCKET_EDGES,
    BatchResult,
    ChunkWork,
    DeadlineExceededError,
    EngineFailedError,
    QueueFullError,
    SchedRequest,
    SchedulerConfig,
    ServiceUnavailableError,
)
from rtvox.runtime.scheduler import Batch, Scheduler
from rtvox.runtime.steps import ChunkJob, PreparedRequest
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult
from rtvox.text.chunking import check_chunk_caps

# How long stop() lets admitted requests finish before failing the rest.
STOP_GRACE_S = 10.0


logger = logging.getLogger(__name__)


def _log_loop_end(task: asyncio.Task[None]) -> None:
    """The batching loop ends only at stop (cancelled); any other end stops all serving, so it is logged loudly
    (and /ready and /health report it)."""
    if not task.cancelled() and task.exception() is not None:
        logger.critical("the batching loop stopped; no request can be served", exc_info=task.exception())


def preempts(config: ServiceConfig, synthesizer: Synthesizer, engine_process: EngineProcess | None = None) -> bool:
    """Whether a service's urgent work overtakes its steps in progress: `preempt_steps`, where the steps allow it
    (in-process per-module engines: Synthesizer.preemptible)."""
    return (
        config.preempt_steps
        and engine_process is None
        and config.engine_process is None
        and bool(getattr(synthesizer, "preemptible", False))
    )


def later_chunk_cap(config: ServiceConfig, preempt: bool) -> int:
    """A service's cap on a later chunk's phonemes: the configured one, else by whether its steps are preempted."""
    if config.max_chunk_phonemes is not None:
        return config.max_chunk_phonemes
    return PREEMPT_CHUNK_PHONEMES if preempt else MAX_CHUNK_PHONEMES


def first_chunk_floor(
    config: ServiceConfig, synthesizer: Synthesizer, engine_process: EngineProcess | None = None
) -> int:
    """A service's floor under its streams' first chunks (chunking.plan_chunks's `min_first`): the configured one,
    else MIN_FIRST_CHUNK_PHONEMES where the primary engines run on the CPU and 0 on a GPU. On a busy CPU a first
    chunk's audio is the runway the second chunk must be made in (a 0.8-s one ran dry at 10 streams on 2 cores);
    a GPU makes any second chunk in milliseconds, so there the floor would only delay first audio."""
    if config.min_first_chunk_phonemes is not None:
        return config.min_first_chunk_phonemes
    if config.engine_process is not None:
        device = str(resolve_device(config.engine_process.partition(":")[0]))  # "auto": the GPU if there is one
    elif engine_process is not None:
        device = str(engine_process.device)
    else:
        device = str(getattr(synthesizer, "device", "cpu"))
    # at most half the first chunk's cap, as the frontend's own default
    return min(MIN_FIRST_CHUNK_PHONEMES, config.first_chunk_phonemes // 2) if device.split(":")[0] == "cpu" else 0


@dataclass(frozen=True)
class ServiceConfig:
    """Limits and batching of one TTSService (each field can be overridden from the environment or CLI)."""

    max_batch: int = 16  # most chunks in one batched engine step
    max_wait_ms: float = 10.0  # a partial batch waits at most this long (from its oldest chunk) for company
    # a batch holding a first chunk waits at most this long (None: max_wait_ms); 0 suits a GPU, whose steps are
    # short: a lone request starts at once and first chunks still batch while a step runs
    first_chunk_wait_ms: float | None = None
    max_queue: int = 256  # most requests admitted at once (preparing, queued or streaming); more → QueueFullError
    max_chars: int = MAX_INPUT_CHARS  # most characters of text per request (OpenAI's limit)
    max_phonemes: int = 16_384  # most phonemes per request after the frontend (~4096 Mandarin characters)
    max_realtime_audio_s: float = 1200.0  # most audio seconds per streamed request (estimated before synthesis)
    default_deadline_s: float | None = 60.0  # per-request time budget when the caller gives none; None = no limit
    # every delivered chunk moves its request's deadline later by the chunk's audio seconds: a stream that keeps
    # ahead of playback is never cut however long its text, one that falls behind it by the budget is
    deadline_follows_audio: bool = True
    fallback_device: str | None = "cpu"  # device of the fallback Synthesizer built at start(); None = no fallback
    redis_url: str | None = None  # shared embedding cache; None keeps the synthesizer's cache as configured
    # Most phonemes per batched step (None: no limit). A step runs to its end, or (preempt_steps) to its next
    # preemption point: on a CPU, a cap near one long chunk keeps first chunks from waiting behind several.
    max_batch_phonemes: int | None = None
    # Most phonemes in a streamed chunk after the first (the frontend splits at phrase boundaries under it): fewer
    # mean shorter steps, more joins. None: PREEMPT_CHUNK_PHONEMES (96) where steps are preempted (preempt_steps:
    # a later chunk's decoder pass is then what a new request may wait for; on the 2-core CPU P99 time to first
    # audio at 8 streams went from 373-516 ms at 200 to 215-356 at 96, BENCHMARKS.md), else MAX_CHUNK_PHONEMES.
    max_chunk_phonemes: int | None = None
    # Most phonemes in a stream's first chunk: its step is every new request's time to first audio.
    first_chunk_phonemes: int = FIRST_CHUNK_PHONEMES
    # Fewest phonemes a first chunk closes at a punctuation cut (an opening "Yes," joins what follows it up to the
    # cap). None: first_chunk_floor decides (MIN_FIRST_CHUNK_PHONEMES with CPU engines, 0 on a GPU); 0: no floor.
    min_first_chunk_phonemes: int | None = None
    # Text frontend in this many worker processes (0: one thread in this process). A GPU server at thousands of
    # requests per second needs them: the frontend is pure Python and would share this process's GIL.
    frontend_processes: int = 0
    # inclusive upper phoneme counts of the scheduler's length buckets (None: its default); finer edges mean less
    # padding in a batch (the captured pipeline pads every row to the longest) and fewer rows per batch
    bucket_edges: tuple[int, ...] | None = None
    # Batches handed to the executor at once. 1: the next batch is formed when the last one returns (freshest
    # batches, lowest time to first audio). 2: the next one is formed and queued while a step runs, so the engine
    # never waits for the loop (completion, delivery, scheduling) between steps: throughput on a busy GPU, at up to
    # one step more of waiting for a chunk that arrives meanwhile. With more than 1 the executor splits steps
    # (Executor.split_steps): on the captured pipeline the engine thread launches the next batch while the device
    # still decodes the last, whose chunks are collected on another thread.
    batches_in_flight: int = 1
    # The interpreter's GIL switch interval while the service runs (sys.setswitchinterval, process-wide; restored at
    # stop; None leaves it). The engine thread gives up the GIL at every device sync and then waits for the event
    # loop to yield it, up to one interval each time (Python's default: 5 ms): on an H200 under saturation the steps
    # spent ~18 of their 40 ms with the device idle, most of it waiting so (load_h200_graphs_9a.json).
    gil_switch_interval_ms: float | None = 0.5
    # Run the primary engines in a child process of their own ("DEVICE" or "DEVICE:BACKEND", e.g. "cuda:graphs";
    # None: on a thread of this process). The synthesizer given to the service then only prepares requests (give it
    # a CPU one) and, unless fallback_device is None, is the fallback too. rtvox.runtime.engine_process says why.
    engine_process: str | None = None
    # Let batches of first chunks, and prepares that run an engine, overtake a step in progress at its next
    # preemption point (after the encoder, after the decoder, between vocoder windows; rtvox.runtime.preempt)
    # rather than wait for its end, and keep first chunks and later chunks in separate batches. Applies where steps
    # have preemption points: in-process per-module engines (the CPU service); not the captured GPU pipeline, the
    # AR family or an engine process. On the 2-core CPU a later chunk's step is up to ~0.5 s.
    preempt_steps: bool = True

    def __post_init__(self) -> None:
        if self.batches_in_flight < 1:
            raise ValueError(f"batches_in_flight must be at least 1, got {self.batches_in_flight}")
        if self.frontend_processes < 0:
            raise ValueError(f"frontend_processes must be >= 0, got {self.frontend_processes}")
        if self.max_batch < 1 or self.max_queue < 1 or self.max_chars < 1 or self.max_phonemes < 1:
            raise ValueError("max_batch, max_queue, max_chars and max_phonemes must be at least 1")
        check_chunk_caps(self.max_chunk_phonemes, self.first_chunk_phonemes, self.min_first_chunk_phonemes)
        if self.first_chunk_wait_ms is not None and not self.first_chunk_wait_ms >= 0:
            raise ValueError(f"first_chunk_wait_ms must be >= 0 or None, got {self.first_chunk_wait_ms}")
        if self.gil_switch_interval_ms is not None and not self.gil_switch_interval_ms > 0:
            raise ValueError(f"gil_switch_interval_ms must be > 0 or None, got {self.gil_switch_interval_ms}")
        if not self.max_wait_ms >= 0 or not self.max_realtime_audio_s > 0:
            raise ValueError("max_wait_ms must be >= 0 and max_realtime_audio_s > 0")
        if self.default_deadline_s is not None and not self.default_deadline_s > 0:
            raise ValueError(f"default_deadline_s must be > 0 or None, got {self.default_deadline_s}")


# ---------------------------------------------------------------------------------------------- counters
# Updated from the event loop only (no locks). TTFA is kept as cumulative histogram buckets (what Prometheus
# wants) and as a window of recent samples (quick percentiles for health and benches).
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


_END = object()  # queued after a request's last chunk


@dataclass
class _Stream:
    """The loop-side record of one admitted request."""

    request_id: str
    arrival: float  # time.monotonic() at admission
    deadline: float | None  # absolute time.monotonic() deadline
    deadline_s: float | None  # the budget as given, for the error message
    queue: asyncio.Queue[object] = field(default_factory=asyncio.Queue)  # AudioChunk | BaseException | _END
    prepared: PreparedRequest | None = None  # set once prepared, before the scheduler sees the request


class TTSService:
    """Serves concurrent streaming synthesis over one Synthesizer's engines (plus a fallback).

    Owns the scheduler, the executor, the per-request streams and the counters. `start()` builds the fallback,
    warms the engines and starts the batching loop; `stop()` drains and shuts down. `synthesizer` stays public
    for voice management (list / clone / delete / embed).
    """

    def __init__(
        self,
        synthesizer: Synthesizer,
        config: ServiceConfig = ServiceConfig(),
        *,
        fallback: Synthesizer | None = None,
        engine_process: EngineProcess | None = None,
    ) -> None:
        """engine_process: a caller-owned EngineProcess (started here if it is not running, left running at stop)
        as the primary engines; `config.engine_process` makes one that the service owns instead."""
        self.synthesizer = synthesizer
        self.config = config
        self._fallback = fallback
        self._engine_process = engine_process
        self._preempt = preempts(config, synthesizer, engine_process)
        self.max_chunk_phonemes = later_chunk_cap(config, self._preempt)
        self.min_first_chunk_phonemes = first_chunk_floor(config, synthesizer, engine_process)
        # how this service's frontend cuts text (Frontend.process keywords): a plan made elsewhere — the HTTP
        # server's word timestamps — must cut the same way to line up with the chunks that come back
        self.chunking: dict[str, int] = {
            "max_chunk_phonemes": self.max_chunk_phonemes,
            "first_chunk_phonemes": config.first_chunk_phonemes,
            "min_first_chunk_phonemes": self.min_first_chunk_phonemes,
        }
        self._scheduler = Scheduler(
            SchedulerConfig(
                max_batch_size=config.max_batch,
                max_wait_s=config.max_wait_ms / 1000.0,
                first_chunk_max_wait_s=None if (first := config.first_chunk_wait_ms) is None else first / 1000.0,
                bucket_edges=DEFAULT_BUCKET_EDGES if config.bucket_edges is None else tuple(config.bucket_edges),
                max_queue=config.max_queue,
                max_batch_phonemes=config.max_batch_phonemes,
                separate_first_chunks=self._preempt,
            )
        )
        self._executor: Executor | None = None
        self._streams: dict[str, _Stream] = {}
        self._ids = itertools.count()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._accepting = False
        self._started = False
        self._saved_switch_interval: float | None = None  # the interpreter's, while gil_switch_interval_ms is set
        self.stats_counters = ServiceStats()
        self.internal_counters = ServiceStats()  # the service's own renders (a clone's calibration), apart

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        """Build the fallback (if configured), connect the cache, warm the engines, start the loop. Idempotent."""
        if self._started:
            return
        self._started = True
        if self.config.gil_switch_interval_ms is not None:
            self._saved_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(self.config.gil_switch_interval_ms / 1000.0)
        synth = self.synthesizer
        if self.config.redis_url and synth.embedding_cache.redis is None:
            # RedisTier pings at construction (bounded by its socket timeout): keep that off the event loop.
            cache = await asyncio.to_thread(
                EmbeddingCache, synth.embedding_cache.local.capacity, redis_url=self.config.redis_url
            )
            synth.embedding_cache = cache
        primary: StepRunner = synth
        owned = False
        if self._engine_process is not None:
            primary = self._engine_process
        elif self.config.engine_process is not None:
            primary, owned = EngineProcess.from_spec(self.config.engine_process, synth), True
        if primary is not synth and self.config.fallback_device is not None:
            self._fallback = synth  # the host side serves when the engine process cannot
        if self._fallback is None and self.config.fallback_device is not None:
            self._fallback = await asyncio.to_thread(self._build_fallback, self.config.fallback_device)
        if self._fallback is not None and self._fallback is not synth:
            # One voice store and one cache: a voice cloned through the service is visible to both engine sets.
            self._fallback.voices = synth.voices
            self._fallback.embedding_cache = synth.embedding_cache
        self._executor = Executor(
            primary,
            self._fallback,
            frontend_processes=self.config.frontend_processes,
            owns_primary=owned,
            split_steps=self.config.batches_in_flight > 1,
            **self.chunking,
            preempt=self._preempt,
        )
        await self._executor.start()
        self._wake = asyncio.Event()  # bound to the running loop
        self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name="rtvox-service-loop")
        self._loop_task.add_done_callback(_log_loop_end)
        self._accepting = True

    def _build_fallback(self, device: str) -> Synthesizer:
        synth = self.synthesizer
        return Synthesizer(synth.model_dir, device=device, backend="eager", embedding_cache=synth.embedding_cache)

    async def stop(self) -> None:
        """Stop admitting, let admitted requests finish for up to STOP_GRACE_S, fail the rest. Idempotent."""
        if not self._started:
            return
        self._accepting = False
        give_up = time.monotonic() + STOP_GRACE_S
        while self._streams and time.monotonic() < give_up and self._loop_task and not self._loop_task.done():
            await asyncio.sleep(0.01)
        for stream in list(self._streams.values()):
            stream.queue.put_nowait(ServiceUnavailableError("the service stopped before this request finished"))
            self._scheduler.cancel(stream.request_id)
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None
        if self._executor is not None:
            await self._executor.stop()
        if self._saved_switch_interval is not None:
            sys.setswitchinterval(self._saved_switch_interval)
            self._saved_switch_interval = None
        self._started = False

    @property
    def ready(self) -> bool:
        """Engines built and warmed, loop running: requests will be served now."""
        loop_running = self._loop_task is not None and not self._loop_task.done()
        return self._accepting and loop_running and self._executor is not None and self._executor.ready

    # ------------------------------------------------------------------ requests
    def stream(self, request: SynthesisRequest, *, deadline_s: float | None = None) -> AsyncIterator[AudioChunk]:
        """Admit a request and return its chunk stream.

        Raises here: TextError (over max_chars), QueueFullError (busy; `retry_after_s`), ServiceUnavailableError.
        Raises from the iterator: TextError / InputError found by the frontend or the phoneme / audio limits,
        DeadlineExceededError, EngineFailedError. Closing the iterator early cancels the request at once.
        """
        return self._admit(request, deadline_s, self.stats_counters)

    def _admit(
        self, request: SynthesisRequest, deadline_s: float | None, stats: ServiceStats
    ) -> AsyncIterator[AudioChunk]:
        """stream()'s checks; `stats`: the counters that take the request's outcome, TTFA and audio."""
        if not self._accepting:
            raise ServiceUnavailableError("the service is not running; call start() first (or it is stopping)")
        if len(request.text) > self.config.max_chars:
            stats.outcome("invalid")
            raise TextError(
                f"text is {len(request.text)} characters, over this server's limit of {self.config.max_chars}; "
                "split it into several requests",
                param="input",
            )
        if len(self._streams) >= self.config.max_queue:
            stats.outcome("rejected")
            raise QueueFullError(
                self._scheduler.retry_after_s(), queued=len(self._streams), limit=self.config.max_queue
            )
        budget = self.config.default_deadline_s if deadline_s is None else deadline_s
        if budget is not None and not budget > 0:
            raise InputError(f"deadline_s must be > 0, got {budget}", param="deadline_s")
        return self._run_stream(request, budget, stats)

    async def synthesize(
        self, request: SynthesisRequest, *, deadline_s: float | None = None, internal: bool = False
    ) -> SynthesisResult:
        """The whole utterance at once (same path and limits as stream()). `internal`: the service's own work (a
        clone's calibration renders), counted in `internal_counters` (stats()["internal_renders"]), not in the request
        figures the metrics report."""
        stats = self.internal_counters if internal else self.stats_counters
        chunks = tuple([c async for c in self._admit(request, deadline_s, stats)])
        audio = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        return SynthesisResult(audio=audio, sample_rate=SAMPLE_RATE, chunks=chunks)

    async def _run_stream(
        self, request: SynthesisRequest, budget: float | None, stats: ServiceStats
    ) -> AsyncIterator[AudioChunk]:
        # The slot is taken when iteration starts (an iterator never started never runs its cleanup), so the
        # admission check is repeated here for streams created together and started later.
        if len(self._streams) >= self.config.max_queue:
            stats.outcome("rejected")
            raise QueueFullError(
                self._scheduler.retry_after_s(), queued=len(self._streams), limit=self.config.max_queue
            )
        now = time.monotonic()
        stream = _Stream(f"r{next(self._ids)}", now, None if budget is None else now + budget, budget)
        self._streams[stream.request_id] = stream
        outcome = "cancelled"  # what a stream closed from outside (aclose, task cancel) counts as
        try:
            assert self._executor is not None
            prepared = await self._until_deadline(stream, self._executor.prepare(request))
            self._check_limits(prepared)
            stream.prepared = prepared
            chunks = tuple(ChunkWork(len(c.ids)) for c in prepared.chunks)
            self._scheduler.add(
                SchedRequest(stream.request_id, chunks, arrival=stream.arrival, deadline=stream.deadline)
            )
            self._wake.set()
            while True:
                item = await self._until_deadline(stream, stream.queue.get())
                if item is _END:
                    outcome = "ok"
                    return
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, AudioChunk)
                if item.index == 0:
                    stats.ttfa(time.monotonic() - stream.arrival)
                stats.delivered(item.seconds)
                if stream.deadline is not None and self.config.deadline_follows_audio:
                    stream.deadline += item.seconds
                    self._scheduler.extend_deadline(stream.request_id, stream.deadline)
                yield item
        except DeadlineExceededError:
            outcome = "expired"
            raise
        except InputError:
            outcome = "invalid"
            raise
        except (EngineFailedError, ServiceUnavailableError):
            outcome = "failed"
            raise
        except Exception:  # anything else is a fault too (a client going away is not an Exception: "cancelled")
            outcome = "failed"
            raise
        finally:
            # Frees the queue slot and the scheduler state at once; a batch in flight drops this request's result.
            self._streams.pop(stream.request_id, None)
            self._scheduler.cancel(stream.request_id)
            stats.outcome(outcome)

    async def _until_deadline(self, stream: _Stream, aw: Any) -> Any:
        if stream.deadline is None:
            return await aw
        try:
            return await asyncio.wait_for(aw, max(0.0, stream.deadline - time.monotonic()))
        except TimeoutError:
            raise DeadlineExceededError(stream.deadline_s) from None

    def _check_limits(self, prepared: PreparedRequest) -> None:
        cfg = self.config
        if prepared.phoneme_count > cfg.max_phonemes:
            raise TextError(
                f"the text reads as {prepared.phoneme_count} phonemes, over this server's limit of "
                f"{cfg.max_phonemes}; split it into several requests",
                param="input",
            )
        seconds = prepared.estimated_seconds()
        if seconds > cfg.max_realtime_audio_s:
            raise TextError(
                f"the text would make about {seconds:.0f} s of audio, over the streaming limit of "
                f"{cfg.max_realtime_audio_s:g} s; split it or use offline mode (Synthesizer.synthesize_many)",
                param="input",
            )

    # ------------------------------------------------------------------ the batching loop
    async def _loop(self) -> None:
        depth = self.config.batches_in_flight
        preempt = self._preempt
        running: set[asyncio.Task[None]] = set()
        express: set[asyncio.Task[None]] = set()  # a batch of first chunks overtaking the step in progress

        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            express.discard(task)
            self._wake.set()

        try:
            while True:
                self._wake.clear()
                now = time.monotonic()
                for request_id in self._scheduler.expire(now):
                    self._send(request_id, DeadlineExceededError(self._budget(request_id)))
                # With `depth` batches at the executor the next event is one returning — unless first chunks may
                # overtake them (preempt): then one batch of first chunks at a time goes beside them.
                overtake = len(running) >= depth and preempt and not express
                if len(running) < depth or overtake:
                    batch = self._scheduler.schedule(now, firsts_only=overtake)
                    if batch is not None and depth == 1 and not preempt:
                        await self._run_batch(batch)
                        continue
                    if batch is not None:
                        task = asyncio.get_running_loop().create_task(self._run_batch(batch))
                        (express if overtake else running).add(task)
                        task.add_done_callback(done)
                        continue
                    wakeup = self._scheduler.next_wakeup(now, firsts_only=overtake)
                else:
                    wakeup = None
                timeout = None if wakeup is None else max(0.0, wakeup - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            for task in running | express:
                task.cancel()

    async def _run_batch(self, batch: Batch) -> None:
        assert self._executor is not None
        jobs = []
        for item in batch.items:
            prepared = self._streams[item.request_id].prepared
            assert prepared is not None
            jobs.append(ChunkJob(prepared, item.chunk_index))
        # first chunks only: with preempt_steps they overtake a step in progress (rtvox.runtime.preempt)
        urgent = self._preempt and all(item.chunk_index == 0 for item in batch.items)
        try:
            outputs = await self._executor.run(jobs, urgent=urgent)
        except Exception as exc:  # the batch's requests get the error; the loop (every other request) goes on
            if not isinstance(exc, EngineFailedError | InputError):  # nothing else should reach here: say so
                logger.error("a batch step failed unexpectedly; its requests get the error", exc_info=exc)
                exc = EngineFailedError(f"synthesis failed ({type(exc).__name__}: {exc}); retry shortly")
            for item in batch.items:  # cancel first so complete() drops their items
                if self._scheduler.cancel(item.request_id):
                    self._send(item.request_id, exc)
            self._scheduler.complete(BatchResult(batch.batch_id))
            return
        seconds = tuple(out.seconds for out in outputs)
        completion = self._scheduler.complete(BatchResult(batch.batch_id, audio_seconds=seconds))
        by_item = {(i.request_id, i.chunk_index): out for i, out in zip(batch.items, outputs, strict=True)}
        for item in completion.delivered:
            self._send(item.request_id, by_item[(item.request_id, item.chunk_index)])
        for request_id in completion.finished:
            self._send(request_id, _END)

    def _send(self, request_id: str, message: object) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            stream.queue.put_nowait(message)

    def _budget(self, request_id: str) -> float | None:
        stream = self._streams.get(request_id)
        return None if stream is None else stream.deadline_s

    # ------------------------------------------------------------------ views
    def health(self) -> dict[str, Any]:
        """{"status": "ok" | "degraded" | "stopped", "ready", "engines", "cache", "queue_depth", ...}."""
        engines = {} if self._executor is None else self._executor.health()
        tiers = self.synthesizer.embedding_cache.health()
        redis = tiers["redis"]
        redis_state = "off" if not redis["configured"] else ("up" if redis["ok"] else "down")
        # Redis down is not fatal (the local LRU serves), but the operator should know: status "degraded".
        cache: dict[str, Any] = {"status": "local-only" if redis_state == "off" else f"redis-{redis_state}", **tiers}
        primary_ok = bool(engines) and engines["primary"]["healthy"]
        loop_dead = self._loop_task is not None and self._loop_task.done()  # never expected; /ready says it too
        degraded = not primary_ok or redis_state == "down" or loop_dead
        sched = self._scheduler.stats()
        return {
            "status": "stopped" if not self._accepting else ("degraded" if degraded else "ok"),
            "ready": self.ready,
            "engines": engines,
            "cache": cache,
            "queue_depth": sched.queue_depth,
            "running": sched.running,
            "admitted": len(self._streams),
            "max_queue": self.config.max_queue,
        }

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: request outcomes, queue, batch sizes, cache hits/misses, TTFA histogram."""
        sched = self._scheduler.stats()
        out = self.stats_counters.snapshot()
        out.update(
            queue_depth=sched.queue_depth,
            running=sched.running,
            admitted=len(self._streams),
            batch_size_histogram=sched.batch_size_histogram,
            scheduler={
                "added": sched.added,
                "finished": sched.finished,
                "cancelled": sched.cancelled,
                "expired": sched.expired,
                "in_flight_batches": sched.in_flight_batches,
            },
            cache=self.synthesizer.embedding_cache.stats(),
            fallback_steps=0 if self._executor is None else self._executor.fallback_steps,
            internal_renders=sum(self.internal_counters.outcomes.values()),
        )
        return out
