"""`rtvox serve`: load the model, build the runtime service, and run the app under uvicorn."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rtvox.server.config import ServerConfig
from rtvox.server.metrics import METRICS_DIR_ENV
from rtvox.server.protocol import SpeechService

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("rtvox.server")
WORKER_CONFIG_ENV = "RTVOX_SERVE_CONFIG"  # the settings, as JSON, for `rtvox serve --workers` processes


def build_service(config: ServerConfig) -> SpeechService:
    """The real TTSService for `config`: a Synthesizer on the chosen device, with a CPU fallback on GPUs; unset
    settings take the device's defaults."""
    from pathlib import Path

    from rtvox.runtime.service import ServiceConfig, TTSService
    from rtvox.runtime.synthesizer import Synthesizer, resolve_device

    voices_dir = Path(config.voices_dir) if config.voices_dir else None
    gpu = resolve_device(config.device).type == "cuda"
    workers = config.workers or 1  # this process's share of the machine; serve() resolves an unset count first
    # Defaults by device (BENCHMARKS.md, serving load): on a GPU the captured pipeline, batches of up to 64 chunks,
    # two in flight, first chunks sent at once, the frontend in worker processes; on the CPU the engine builder's
    # per-module pick ("auto": the fastest verified backend per module, eager where a build fails), batches of 16,
    # one at a time.
    backend = config.backend if config.backend != "auto" else ("graphs" if gpu else "auto")
    max_batch = config.max_batch or (64 if gpu else 16)
    first_wait = config.first_chunk_wait_ms if config.first_chunk_wait_ms is not None else (0.0 if gpu else None)
    # Two batches in flight on the captured pipeline: +15 % saturated throughput on an H100 in one run, single-stream
    # time to first audio unchanged (BENCHMARKS.md, run 22); elsewhere a step is the host's own work, nothing overlaps.
    depth = config.batches_in_flight or (2 if gpu and backend == "graphs" else 1)
    frontends = config.frontend_processes
    if frontends is None:  # the host's cores shared among the server processes
        frontends = min(8, max(0, (os.cpu_count() or 1) - 2)) // workers if gpu else 0
    if not gpu and workers > 1:  # each worker's torch threads: its share of the cores, not all of them
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    # With the engines in their own process this one prepares requests and is their fallback: it stays on the CPU.
    device, host_backend = ("cpu", "eager") if config.engine_process else (config.device, backend)
    # Fused frame kernels: slower at batch 1, faster where the device is the limit (two processes on one GPU:
    # 11.0-11.2x one-at-a-time against 9.7x without them, BENCHMARKS.md runs 24-26)
    fused = config.fused_kernels
    if fused is None:
        fused = gpu and workers >= 2 and _have_triton()
    synth = Synthesizer(config.model, device=device, backend=host_backend, voices_dir=voices_dir, fused_frames=fused)
    service_config = ServiceConfig(
        max_batch=max_batch,
        max_wait_ms=config.max_wait_ms,
        max_queue=config.max_queue,
        max_chars=config.max_input_chars,
        default_deadline_s=config.deadline_s,
        # A CPU primary has nothing to fall back to; a GPU one falls back to the same weights on the CPU.
        fallback_device="cpu" if config.engine_process or synth.device.type != "cpu" else None,
        engine_process=f"{config.device}:{backend}" if config.engine_process else None,
        redis_url=config.redis_url,
        first_chunk_wait_ms=first_wait,
        max_chunk_phonemes=config.max_chunk_phonemes,
        first_chunk_phonemes=config.first_chunk_phonemes,
        min_first_chunk_phonemes=config.min_first_chunk_phonemes,
        frontend_processes=frontends,
        batches_in_flight=depth,
        preempt_steps=config.preempt_steps,
    )
    return TTSService(synth, service_config)


def _have_triton() -> bool:
    from rtvox.engines.triton_frames import HAVE_TRITON

    return HAVE_TRITON


def serve(config: ServerConfig) -> None:
    """Run until interrupted. Blocks."""
    import uvicorn

    from rtvox.server.app import create_app

    _log_setup(config)
    config = dataclasses.replace(config, workers=resolve_workers(config))
    if config.workers and config.workers > 1:
        _serve_workers(config)
        return
    service = build_service(config)
    app = create_app(service, config)
    log.info("rtvox serving model %s on http://%s:%d", service.synthesizer.model_dir, config.host, config.port)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level, access_log=False)


# GPU memory of one worker's engines, measured on an H100 (BENCHMARKS.md, "Serving over HTTP"): 17.6-17.9 GiB while
# serving, up to 26.1 GiB while its buckets are captured (the graph pools of batches up to 64 chunks). Workers
# capture one at a time (`_one_capture_at_a_time`), so N of them need (N - 1) serving footprints and one capture
# peak; started all at once, four did not fit on that card. With margins:
GPU_SERVING_BYTES = 20 * 1024**3
GPU_CAPTURE_BYTES = 28 * 1024**3
# The most workers a GPU gets by default: two, the best setting measured twice (in process and over HTTP on an
# H100); three served more over HTTP once (19.8x against 15.2-15.3x) and less in another run whose start overlapped
# its levels, so `--workers 3` is the operator's choice, not the default.
MAX_DEFAULT_GPU_WORKERS = 2


def resolve_workers(config: ServerConfig) -> int:
    """The number of server processes: `config.workers` when set, else the device's default: on a GPU as many as
    its memory holds (one capturing, the rest serving), 1 to MAX_DEFAULT_GPU_WORKERS — 2 on an 80 GB H100, where
    over HTTP they served 15.2-15.3x one request at a time against 7.8x with one; 1 on the CPU
    (one process is the measured default there: a second adds saturated throughput but doubles memory and
    start-up on a small machine)."""
    if config.workers is not None:
        return config.workers
    from rtvox.runtime.synthesizer import resolve_device

    device = resolve_device(config.device)
    if device.type != "cuda":
        return 1
    import torch

    total = torch.cuda.get_device_properties(device).total_memory  # no context is made, no memory taken
    return max(1, min(MAX_DEFAULT_GPU_WORKERS, 1 + (total - GPU_CAPTURE_BYTES) // GPU_SERVING_BYTES))


@contextlib.contextmanager
def _one_capture_at_a_time(config: ServerConfig) -> Iterator[None]:
    """Around a worker's engine build on a GPU: an exclusive lock on a file in the workers' shared folder, so
    their capture peaks (a third above what they hold while serving) come one after another, not together."""
    from rtvox.runtime.synthesizer import resolve_device

    shared = os.environ.get(METRICS_DIR_ENV)
    if not shared or (config.workers or 1) < 2 or resolve_device(config.device).type != "cuda":
        yield
        return
    import fcntl

    with open(os.path.join(shared, "capture.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a worker dies holding it
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _log_setup(config: ServerConfig) -> None:
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _serve_workers(config: ServerConfig) -> None:
    """`config.workers` uvicorn worker processes on one socket, each building its own service (`worker_app`).

    Why: under load one server process is bound by its own host work — the event loop, the scheduler and the
    engine thread share one GIL, and the device idles while they wait for it (BENCHMARKS.md, serving load) —
    so several processes keep one device (or the CPU's cores) busier. What they share: the clones folder (each
    worker re-reads it when it changes), Redis when configured, and the metrics (prometheus_client's
    multiprocess files plus each worker's runtime snapshot, in one folder, summed at every scrape)."""
    import tempfile

    import uvicorn

    from rtvox.models.bundle import resolve_model
    from rtvox.runtime.synthesizer import resolve_device

    # what would fail in every worker fails here, once, with its message (a worker that dies at start is restarted)
    resolve_model(config.model)
    resolve_device(config.device)
    os.environ[WORKER_CONFIG_ENV] = config.to_json()
    with tempfile.TemporaryDirectory(prefix="rtvox-metrics-") as shared:
        os.environ[METRICS_DIR_ENV] = shared  # read when a worker imports prometheus_client: before anything
        log.info("rtvox serving on http://%s:%d with %d worker processes", config.host, config.port, config.workers)
        uvicorn.run(
            "rtvox.server.serve:worker_app",
            factory=True,
            workers=config.workers,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            access_log=False,
        )


def worker_app() -> FastAPI:
    """One worker's app (uvicorn's factory, in each worker process of `rtvox serve --workers N`)."""
    from rtvox.server.app import create_app

    config = ServerConfig.from_json(os.environ[WORKER_CONFIG_ENV])
    _log_setup(config)
    with _one_capture_at_a_time(config):
        service = build_service(config)
    log.info("worker %d serving model %s", os.getpid(), service.synthesizer.model_dir)
    return create_app(service, config)
