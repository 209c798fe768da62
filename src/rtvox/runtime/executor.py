"""The executor: owns the engines (through a primary and a fallback Synthesizer) and the threads that run them.

It has no queues and makes no scheduling choice: the service hands it one prepared batch at a time. What it adds
over calling `Synthesizer.run_step` is fault handling: when the primary's engines raise (a CUDA out-of-memory
included) the same step, which mutates nothing, is re-run on the fallback (by default a CPU Synthesizer with the
same weights, so the audio is the same up to float rounding), the primary is marked unhealthy and rebuilt in the
background, and work goes back to it once the rebuild and a warm-up step succeed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor as Executor_
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch

from rtvox.constants import FIRST_CHUNK_PHONEMES, MAX_CHUNK_PHONEMES
from rtvox.errors import InputError
from rtvox.runtime.engine_process import EngineProcess
from rtvox.runtime.preempt import UrgentQueue, preemptible
from rtvox.runtime.sched_types import EngineFailedError
from rtvox.runtime.steps import ChunkJob, PreparedRequest
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import AudioChunk, SynthesisRequest
from rtvox.text.worker import WARMUP_TEXT, init_worker, read_text

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Rebuild retries after a failed rebuild: first wait, doubling up to the cap (a broken GPU should not spin).
REBUILD_BACKOFF_S = 1.0
REBUILD_BACKOFF_MAX_S = 30.0


class StepRunner(Protocol):
    """What the executor needs of an engine set's synthesizer: a `Synthesizer`, or an `EngineProcess` (its steps
    in a child process)."""

    device: torch.device
    backend: str

    def prepare(self, request: SynthesisRequest, front: Any = None) -> PreparedRequest: ...

    def prepares_on_host(self, request: SynthesisRequest) -> bool: ...

    def run_step(self, jobs: Sequence[ChunkJob]) -> list[AudioChunk]: ...


@dataclass
class EngineSet:
    """One Synthesizer's engines as the executor sees them: health, fault counters, and the thread they run on."""

    role: str  # "primary" or "fallback"
    synth: StepRunner
    pool: ThreadPoolExecutor  # one thread: a Synthesizer is not thread-safe, and one thread per device is enough
    healthy: bool = True  # False from a fault until a rebuild and warm-up succeed
    warmed: bool = False  # a warm-up step has run since the last (re)build
    error: str | None = None  # the last fault, "Type: message"
    faults: int = 0  # steps that raised on these engines
    rebuilds: int = 0  # successful rebuilds
    steps: int = 0  # steps served
    last_fault_at: float | None = None  # time.time() of the last fault
    rebuilding: bool = field(default=False)
    busy_s: float = 0.0  # seconds its thread spent on work (steps, prepares, warm-ups, rebuilds)
    step_s: float = 0.0  # ... of which in chunk steps
    urgent: UrgentQueue = field(default_factory=UrgentQueue)  # work a running step lets in (rtvox.runtime.preempt)

    @property
    def preemptible(self) -> bool:
        """Its steps have preemption points (an in-process Synthesizer on per-module engines)."""
        return bool(getattr(self.synth, "preemptible", False))

    def health(self) -> dict[str, Any]:
        return {
            "device": str(self.synth.device),
            "backend": self.synth.backend,
            "fused_frames": bool(getattr(self.synth, "fused_frames", False)),
            **engine_modules(self.synth),
            "healthy": self.healthy,
            "warmed": self.warmed,
            "rebuilding": self.rebuilding,
            "error": self.error,
            "faults": self.faults,
            "rebuilds": self.rebuilds,
            "steps": self.steps,
            "busy_s": round(self.busy_s, 4),
            "step_s": round(self.step_s, 4),
            "preemptions": self.urgent.preemptions,
        }


def engine_modules(synth: StepRunner) -> dict[str, dict[str, str]]:
    """What each module runs on, for /health: {"modules": {"vocoder": "eager-bfloat16", ...}} (backend "auto"
    picks per module). Under the captured pipeline (backend "graphs") its programs serve the requests, so they are
    the modules ("graphs-float32" for the encoder, "graphs-bfloat16" for the frame-rate half on a GPU), and the
    eager engines beside them, which serve only what falls outside its shape profile, are listed apart."""
    engines = {
        name: f"{engine.backend}-{str(engine.dtype).removeprefix('torch.')}"
        for name, engine in (getattr(synth, "engines", None) or {}).items()
    }
    pipeline = getattr(synth, "pipeline", None)
    if pipeline is None:
        return {"modules": engines}
    frames = f"graphs-{pipeline.info['dtype']}"
    modules = {"acoustic_encode": f"graphs-{pipeline.info['encode_dtype']}", "acoustic_decode": frames}
    return {"modules": {**modules, "vocoder": frames}, "outside_profile": engines}


def warm_up(synth: StepRunner) -> None:
    """One short synthesis, so lazy initialization (allocators, kernels, compiled graphs) is not paid by a user."""
    prepared = synth.prepare(SynthesisRequest(text=WARMUP_TEXT))
    synth.run_step([ChunkJob(prepared, 0)])


class Executor:
    """Runs prepare and chunk steps on the primary engines, or on the fallback while the primary is unhealthy."""

    def __init__(
        self,
        primary: StepRunner,
        fallback: Synthesizer | None,
        *,
        frontend_processes: int = 0,
        owns_primary: bool = True,
        split_steps: bool = False,
        max_chunk_phonemes: int = MAX_CHUNK_PHONEMES,
        first_chunk_phonemes: int = FIRST_CHUNK_PHONEMES,
        min_first_chunk_phonemes: int = 0,
        preempt: bool = False,
    ) -> None:
        """`max_chunk_phonemes`, `first_chunk_phonemes`: the frontend's caps on a later and on the first chunk,
        `min_first_chunk_phonemes` its floor under the first (0: none) — the service's.
        `preempt`: urgent work (prepares on the engine thread, `run(..., urgent=True)` steps) runs at the next
        preemption point of a step in progress on engines that have them (`EngineSet.preemptible`), not after it.
        `split_steps` (for more than one batch in flight): a step's launch runs on the engine thread and its
        finish — waiting for the device and building the chunks — on a thread of its own, so the engine thread
        launches the next batch while the device still works on the last (runners with `launch_step`)."""
        self.owns_primary = owns_primary  # an EngineProcess primary is closed at stop() only if it is ours
        self.preempt = preempt
        self.split_steps = split_steps
        self._finish_pool = ThreadPoolExecutor(2, thread_name_prefix="rtvox-finish")
        # the frontend (and its lexicon) of the primary's own Synthesizer, or of the host side of an EngineProcess
        host: Synthesizer = primary.host if isinstance(primary, EngineProcess) else primary  # type: ignore[assignment]
        self.primary = EngineSet("primary", primary, ThreadPoolExecutor(1, thread_name_prefix="rtvox-primary"))
        self.fallback = (
            None
            if fallback is None
            else EngineSet("fallback", fallback, ThreadPoolExecutor(1, thread_name_prefix="rtvox-fallback"))
        )
        # The frontend (text → phonemes and chunks) touches no engine: one thread of its own, shared by both sets,
        # or worker processes (pure Python under one GIL caps a busy GPU server's request rate; the workers start
        # by spawn and never import torch).
        self._frontend_pool: Executor_ = (
            ThreadPoolExecutor(1, thread_name_prefix="rtvox-frontend")
            if frontend_processes <= 0
            else ProcessPoolExecutor(
                frontend_processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_worker,
                initargs=(host.frontend.lexicon,),
            )
        )
        self.frontend_processes = max(0, frontend_processes)
        # text -> FrontendResult, run on _frontend_pool: a module-level function a worker process can unpickle
        self._read_text = functools.partial(
            read_text if self.frontend_processes else host.frontend.process,
            max_chunk_phonemes=max_chunk_phonemes,
            first_chunk_phonemes=first_chunk_phonemes,
            min_first_chunk_phonemes=min_first_chunk_phonemes,
        )
        self._rebuild_task: asyncio.Task[None] | None = None
        self.fallback_steps = 0  # steps the fallback served because the primary failed or was unhealthy

    @property
    def ready(self) -> bool:
        """Some engine set is healthy and warmed, so a request can be served now."""
        return any(s is not None and s.healthy and s.warmed for s in (self.primary, self.fallback))

    async def start(self) -> None:
        """Warm both engine sets (concurrently: each on its own thread)."""
        sets = [s for s in (self.primary, self.fallback) if s is not None]
        await asyncio.gather(*(self._warm(s) for s in sets))
        if self.frontend_processes:  # start the workers (each warms its frontend up in its initializer)
            loop = asyncio.get_running_loop()
            texts = [WARMUP_TEXT] * (2 * self.frontend_processes)
            await asyncio.gather(*(loop.run_in_executor(self._frontend_pool, read_text, t) for t in texts))

    async def _warm(self, engines: EngineSet) -> None:
        def warm() -> None:
            if isinstance(engines.synth, EngineProcess) and not engines.synth.alive:
                engines.synth.start()  # builds and warms its engines in the child
            warm_up(engines.synth)

        await self._call(engines, warm)
        engines.warmed = True

    async def stop(self) -> None:
        if self._rebuild_task is not None:
            self._rebuild_task.cancel()
            await asyncio.gather(self._rebuild_task, return_exceptions=True)
        for engines in (self.primary, self.fallback):
            if engines is not None:
                engines.pool.shutdown(wait=False, cancel_futures=True)
                if isinstance(engines.synth, EngineProcess) and (engines is not self.primary or self.owns_primary):
                    await asyncio.to_thread(engines.synth.close)
        self._frontend_pool.shutdown(wait=False, cancel_futures=True)
        self._finish_pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ work
    async def prepare(self, request: SynthesisRequest) -> PreparedRequest:
        """The text frontend on its own thread (pure Python: it overlaps the engine thread's waits on the device),
        then condition on the serving engine set; InputError and TextError go to the caller as they are."""
        front = await asyncio.get_running_loop().run_in_executor(self._frontend_pool, self._read_text, request.text)
        serving = self.primary if self.primary.healthy or self.fallback is None else self.fallback
        if serving.synth.prepares_on_host(request):
            # tens of microseconds of host work: here, rather than a hop to the engine thread, where it would
            # queue behind steps and cost that thread a GIL hand-over per request
            try:
                return serving.synth.prepare(request, front)
            except InputError:
                raise
            except Exception:  # unexpected: the engine-thread path below retries, with its fault handling
                logger.exception("preparing a request on the host failed; retrying on the engine thread")
        # urgent: the request's first chunk cannot be scheduled before this
        return await self._serve(lambda synth: synth.prepare(request, front), urgent=True)

    async def run(self, jobs: Sequence[ChunkJob], *, urgent: bool = False) -> list[AudioChunk]:
        """One batched chunk step; re-run on the fallback if the primary raises (in its launch or its finish).
        `urgent` (a batch of first chunks): with `preempt`, it runs at the next preemption point of a step in
        progress."""
        if not self.split_steps:
            return await self._serve(lambda synth: synth.run_step(jobs), step=True, urgent=urgent)
        finish = await self._serve(lambda synth: launch_step(synth, jobs), step=True, then=self._finish, urgent=urgent)
        return finish()

    async def _finish(self, finish: Callable[[], list[AudioChunk]]) -> Callable[[], list[AudioChunk]]:
        """A launched step's finish, run off the engine thread; its chunks handed back as a finished step."""
        chunks = await asyncio.get_running_loop().run_in_executor(self._finish_pool, finish)
        return lambda: chunks

    async def _serve(
        self,
        work: Callable[[StepRunner], T],
        *,
        step: bool = False,
        then: Callable[[T], Awaitable[T]] | None = None,
        urgent: bool = False,
    ) -> T:
        """`work` on the engine thread of the primary (the fallback while the primary is unhealthy), then `then`
        on its result, if given; a failure in either is the engines' fault and re-runs both on the fallback."""
        first = self.primary if self.primary.healthy or self.fallback is None else self.fallback

        async def call(engines: EngineSet) -> T:
            result = await self._call(engines, lambda: work(engines.synth), step=step, urgent=urgent)
            return result if then is None else await then(result)

        try:
            result = await call(first)
        except InputError:
            raise  # the caller's input, not an engine fault
        except Exception as exc:  # any engine failure, torch.cuda.OutOfMemoryError included
            self._fault(first, exc)
            second = self.fallback if first is self.primary else None
            if second is None:
                raise EngineFailedError(f"synthesis failed on the {first.role} engines ({exc}); retry shortly") from exc
            try:
                result = await call(second)
            except InputError:
                raise
            except Exception as exc2:
                self._fault(second, exc2)
                raise EngineFailedError(f"synthesis failed on every engine ({exc2}); retry shortly") from exc2
            self.fallback_steps += 1
            second.steps += 1
            return result
        first.steps += 1
        if first is not self.primary:
            self.fallback_steps += 1
        return result

    async def _call(self, engines: EngineSet, fn: Callable[[], T], *, step: bool = False, urgent: bool = False) -> T:
        preempt = self.preempt and engines.preemptible
        queue = engines.urgent

        def timed() -> T:
            start, nested = time.perf_counter(), queue.nested_s
            try:
                if preempt and step and not urgent:  # urgent work may run at this step's preemption points
                    with preemptible(queue.run_pending):
                        return fn()
                return fn()
            finally:
                # this job's own time: urgent jobs it let in count themselves (only this set's thread writes these)
                spent = time.perf_counter() - start - (queue.nested_s - nested)
                engines.busy_s += spent
                if step:
                    engines.step_s += spent

        if preempt and urgent:
            return await asyncio.wrap_future(queue.submit(engines.pool, timed))
        return await asyncio.get_running_loop().run_in_executor(engines.pool, timed)

    # ------------------------------------------------------------------ faults
    def _fault(self, engines: EngineSet, exc: BaseException) -> None:
        engines.faults += 1
        engines.error = f"{type(exc).__name__}: {exc}"
        engines.last_fault_at = time.time()
        if not engines.healthy:
            return
        engines.healthy = False
        logger.error("%s engines failed (%s); serving from the fallback and rebuilding", engines.role, engines.error)
        if self._rebuild_task is None or self._rebuild_task.done():
            self._rebuild_task = asyncio.get_running_loop().create_task(self._rebuild_all())

    async def _rebuild_all(self) -> None:
        """Rebuild every unhealthy engine set until each succeeds (with backoff) or the executor stops."""
        delay = REBUILD_BACKOFF_S
        while True:
            broken = [s for s in (self.primary, self.fallback) if s is not None and not s.healthy]
            if not broken:
                return
            for engines in broken:
                engines.rebuilding = True
                try:
                    await self._call(engines, lambda e=engines: _rebuild(e.synth))  # type: ignore[misc]
                except Exception as exc:  # the rebuild itself failed: keep the set out of service, retry later
                    engines.error = f"rebuild failed: {type(exc).__name__}: {exc}"
                    logger.error("rebuilding the %s engines failed (%s)", engines.role, engines.error)
                else:
                    engines.healthy, engines.warmed = True, True
                    engines.rebuilds += 1
                    logger.warning("%s engines rebuilt and healthy again", engines.role)
                finally:
                    engines.rebuilding = False
            if any(s is not None and not s.healthy for s in (self.primary, self.fallback)):
                await asyncio.sleep(delay)
                delay = min(delay * 2, REBUILD_BACKOFF_MAX_S)

    def health(self) -> dict[str, Any]:
        out = {"primary": self.primary.health()}
        if self.fallback is not None:
            out["fallback"] = self.fallback.health()
        return out


def launch_step(synth: StepRunner, jobs: Sequence[ChunkJob]) -> Callable[[], list[AudioChunk]]:
    """The runner's launched step (Synthesizer.launch_step), or its whole step for runners without one."""
    launch = getattr(synth, "launch_step", None)
    if launch is not None:
        out: Callable[[], list[AudioChunk]] = launch(jobs)
        return out
    chunks = synth.run_step(jobs)
    return lambda: chunks


def _rebuild(synth: StepRunner) -> None:
    if isinstance(synth, EngineProcess):
        synth.restart()  # a fresh process: its engines are built and warmed before it answers
        return
    assert isinstance(synth, Synthesizer)
    if synth.device.type == "cuda":
        torch.cuda.empty_cache()  # after an OOM the caching allocator may hold the memory the rebuild needs
    synth.build_engines()
    warm_up(synth)
