"""The primary engines in a process of their own (`ServiceConfig.engine_process`).

Why: in one process the engine thread and the event loop share one GIL. Under saturation on an H200 the engine
thread gave up the GIL at every device sync and then waited for the loop (client streams, scheduling, delivery,
preparing requests) to hand it back, so the GPU sat in a step's programs only 43–53 % of the wall time
(BENCHMARKS.md, runs 9–12). Here the engines run in a spawned child with its own interpreter; the service's engine
thread only sends a step's rows and waits for the answer with the GIL released.

    service process                                    engine process (spawn)
    ───────────────                                    ──────────────────────
    prepare (frontend, conditioning on the CPU)        Synthesizer(model, device, backend) built and warmed
    engine thread: rows of the step ──── pipe ───────► run_step(jobs)
                   ◄── per row: (offset, samples, frames per id) ── audio written into shared memory
                   copy each row's audio out of the shared memory, AudioChunks as `run_step` makes them

A row carries only what a chunk step reads: phoneme ids, target frames, the condition vector, speed / pitch /
energy scales, the prosody row, tilt and timbre (the request's reference clips never travel). Audio goes through a
shared memory block in two halves by step parity; a step whose audio does not fit its half travels in the pipe.
Faults keep the executor's contract: an exception in the child comes back as `EngineProcessError` (the executor
re-runs the step on the fallback and rebuilds), a child that dies fails the step the same way, and a rebuild is a
restart of the child. The FastSpeech-family models only: the AR family's step reads more of each request.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.errors import InputError, ModelError
from rtvox.runtime.steps import ChunkJob, PreparedChunk, PreparedRequest, audio_chunk
from rtvox.runtime.types import AudioChunk, SynthesisRequest

# Shared audio per engine process: two halves of this many bytes (a 64-row step of 5-s chunks is ~31 MB of float32).
SHARED_AUDIO_BYTES = 128 * 2**20
START_TIMEOUT_S = 900.0  # building and capturing every CUDA graph bucket takes minutes on a cold GPU
STOP_TIMEOUT_S = 10.0

Row = tuple[Any, ...]  # see `job_row`


class EngineProcessError(RuntimeError):
    """The engine process failed a step, failed to start, or died."""


def job_row(job: ChunkJob) -> Row:
    """What the engine process needs of one chunk job: plain values and arrays, no reference audio."""
    prepared, chunk = job.prepared, job.prepared.chunks[job.index]
    request = prepared.request
    cond = prepared.cond.detach().to("cpu", torch.float32).numpy()
    return (
        chunk.ids,
        chunk.target_frames,
        cond,
        request.speed * chunk.rate,  # the child's chunk has rate 1: the factor travels in the speed
        request.pitch_scale,
        request.energy_scale,
        request.duration,
        tuple(prepared.prosody),
        prepared.tilt,
        prepared.timbre,
    )


def row_job(row: Row) -> ChunkJob:
    """The engine process's ChunkJob for a row: one chunk whose phonemes are its ids (frames come back per id)."""
    ids, target_frames, cond, speed, pitch, energy, duration, prosody, tilt, timbre = row
    chunk = PreparedChunk(text="", phonemes=tuple(str(i) for i in ids), ids=tuple(ids), target_frames=target_frames)
    request = SynthesisRequest(text="", speed=speed, pitch_scale=pitch, energy_scale=energy, duration=duration)
    cond_t = torch.from_numpy(cond)
    prepared = PreparedRequest(request, "", (chunk,), cond_t, prosody=prosody, tilt=tilt, timbre=timbre)
    return ChunkJob(prepared, 0)


def parse_spec(spec: str) -> tuple[str, str]:
    """ "cuda:1:graphs" → ("cuda:1", "graphs"); "cuda:1" → ("cuda:1", "auto"); "cpu:eager" → ("cpu", "eager")."""
    head, sep, tail = spec.rpartition(":")
    if not sep or tail.isdigit():  # no backend named: the last part is the device's index, or there is none
        return spec, "auto"
    return head, tail


def _serve(conn: Connection, model: str, device: str, backend: str, dtype: str, shm_name: str, half: int) -> None:
    """The engine process: build, warm, then run steps until told to stop or the pipe closes."""
    from rtvox.runtime.executor import warm_up
    from rtvox.runtime.synthesizer import Synthesizer

    try:
        synth = Synthesizer(model, device=device, backend=backend, dtype=dtype)
        warm_up(synth)
        shm = SharedMemory(name=shm_name)
    except BaseException as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", {"device": str(synth.device), "backend": synth.backend}))
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            if message[0] == "stop":
                return
            if message[0] == "spans":
                spans = synth.pipeline.spans if synth.pipeline is not None else None
                conn.send(("spans", None if spans is None else spans.totals()))
                continue
            _, step, rows = message
            try:
                chunks = synth.run_step([row_job(r) for r in rows])
            except Exception as exc:
                conn.send(("error", step, type(exc).__name__, str(exc), isinstance(exc, InputError)))
                continue
            conn.send(("done", step, _place(shm, chunks, (step % 2) * half, half)))
    finally:
        shm.close()


def _place(shm: SharedMemory, chunks: Sequence[AudioChunk], start: int, size: int) -> list[tuple[Any, ...]]:
    """Each chunk's audio into shared memory from `start` while it fits its half: (offset, samples, frames per id),
    or (None, array, frames per id) for audio that travels in the pipe."""
    out: list[tuple[Any, ...]] = []
    offset, end = start, start + size
    buf = shm.buf
    assert buf is not None
    for chunk in chunks:
        audio = np.ascontiguousarray(chunk.audio, dtype=np.float32)
        if offset + audio.nbytes <= end:
            np.frombuffer(buf, np.float32, audio.size, offset)[:] = audio
            out.append((offset, audio.size, chunk.durations))
            offset += audio.nbytes
        else:
            out.append((None, audio, chunk.durations))
    return out


class EngineProcess:
    """A Synthesizer's chunk steps in a child process; prepare runs on `host` (a Synthesizer of the same model in
    this process, on the CPU). The executor uses it as an engine set's synthesizer: `run_step`, `prepare`,
    `prepares_on_host`, `restart` (its rebuild), `close`. `child_main` is the child's entry point (a probe may
    swap in one that emulates the device)."""

    child_main: Callable[..., None] = staticmethod(_serve)

    def __init__(
        self,
        model_dir: str | Path,
        device: str,
        backend: str,
        host: Any,
        *,
        dtype: str = "float32",
        shared_bytes: int = SHARED_AUDIO_BYTES,
    ) -> None:
        from rtvox.models.ar_bundle import ARBundle

        if isinstance(host.bundle, ARBundle):
            raise ModelError("engine_process serves the FastSpeech-family models only, not the AR family")
        from rtvox.runtime.synthesizer import resolve_device

        self.model_dir, self.backend, self.dtype = str(model_dir), backend, dtype
        self.device = resolve_device(device)  # "auto": the GPU if there is one
        self.host = host
        self.half = shared_bytes // 2
        self._ctx = multiprocessing.get_context("spawn")
        self._shm: SharedMemory | None = None
        self._conn: Connection | None = None
        self._proc: Any = None
        self._steps = 0
        self._lock = threading.Lock()  # one step in flight: the engine set's one thread, or a rebuild
        self.info: dict[str, Any] = {}

    @classmethod
    def from_spec(cls, spec: str, host: Any) -> EngineProcess:
        """From `ServiceConfig.engine_process`'s "DEVICE" or "DEVICE:BACKEND" (backend "auto" when not given);
        the device may carry its index ("cuda:1:graphs", "cuda:1")."""
        device, backend = parse_spec(spec)
        return cls(host.model_dir, device, backend, host)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Spawn the child and wait until its engines are built and warm (EngineProcessError if they fail)."""
        with self._lock:
            self._stop_locked()
            self._shm = SharedMemory(create=True, size=2 * self.half)
            parent, child = self._ctx.Pipe()
            args = (child, self.model_dir, str(self.device), self.backend, self.dtype, self._shm.name, self.half)
            self._proc = self._ctx.Process(target=self.child_main, args=args, name="rtvox-engine", daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent
            if not parent.poll(START_TIMEOUT_S):
                self._stop_locked()
                raise EngineProcessError(f"the engine process did not start within {START_TIMEOUT_S:.0f} s")
            try:
                kind, detail = parent.recv()
            except EOFError:
                kind, detail = "failed", f"it exited with code {self._proc.exitcode}"
            if kind != "ready":
                self._stop_locked()
                raise EngineProcessError(f"the engine process failed to start: {detail}")
            self.info = dict(detail)

    def restart(self) -> None:
        """The executor's rebuild: a fresh child (a CUDA fault can leave a context unusable)."""
        self.start()

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        conn, proc, shm = self._conn, self._proc, self._shm
        self._conn = self._proc = self._shm = None
        if conn is not None:
            with contextlib.suppress(OSError, ValueError):  # a dead child's pipe
                conn.send(("stop",))
            conn.close()
        if proc is not None:
            proc.join(STOP_TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join(STOP_TIMEOUT_S)
        if shm is not None:
            shm.close()
            shm.unlink()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def device_spans(self) -> dict[str, float] | None:
        """The child's captured-pipeline DeviceSpans totals (None: not running, or no captured pipeline)."""
        with self._lock:
            if self._conn is None:
                return None
            try:
                self._conn.send(("spans",))
                kind, totals = self._conn.recv()
            except (EOFError, OSError):
                return None
            return totals if kind == "spans" else None

    # ------------------------------------------------------------------ the Synthesizer surface the executor uses
    def prepares_on_host(self, request: SynthesisRequest) -> bool:
        return bool(self.host.prepares_on_host(request))

    def prepare(self, request: SynthesisRequest, front: Any = None) -> PreparedRequest:
        prepared: PreparedRequest = self.host.prepare(request, front)
        return prepared

    def run_step(self, jobs: Sequence[ChunkJob]) -> list[AudioChunk]:
        """One chunk step in the child; blocks (GIL released while it waits) until its audio is back."""
        rows = [job_row(job) for job in jobs]
        with self._lock:
            conn, shm = self._conn, self._shm
            if conn is None or shm is None:
                raise EngineProcessError("the engine process is not running")
            step = self._steps
            self._steps += 1
            try:
                conn.send(("step", step, rows))
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                code = None if self._proc is None else self._proc.exitcode
                raise EngineProcessError(f"the engine process died (exit code {code})") from exc
            if reply[0] == "error":
                _, _, kind, message, bad_input = reply
                if bad_input:
                    raise InputError(message)
                raise EngineProcessError(f"{kind}: {message}")
            _, done, placed = reply
            if done != step:
                raise EngineProcessError(f"the engine process answered step {done} to step {step}")
            out = []
            buf = shm.buf
            assert buf is not None
            for job, (where, audio, frames) in zip(jobs, placed, strict=True):
                if where is not None:  # a copy: the next step but one writes this half again
                    audio = np.frombuffer(buf, np.float32, audio, where).copy()
                out.append(audio_chunk(job, audio, frames))
            return out
