"""`rtvox serve`: load the model, build the runtime service, and run the app under uvicorn."""

from __future__ import annotations

import logging
import os
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
    # Defaults by device (BENCHMARKS.md, serving load): on a GPU the captured pipeline, batches of up to 64 chunks,
    # two in flight, first chunks sent at once, the frontend in worker processes; on the CPU eager engines, batches
    # of 16, one at a time.
    backend = config.backend if config.backend != "auto" else ("graphs" if gpu else "eager")
    max_batch = config.max_batch or (64 if gpu else 16)
    first_wait = config.first_chunk_wait_ms if config.first_chunk_wait_ms is not None else (0.0 if gpu else None)
    # Two batches in flight on the captured pipeline: +15 % saturated throughput on an H100 in one run, single-stream
    # time to first audio unchanged (BENCHMARKS.md, run 22); elsewhere a step is the host's own work, nothing overlaps.
    depth = config.batches_in_flight or (2 if gpu and backend == "graphs" else 1)
    frontends = config.frontend_processes
    if frontends is None:  # the host's cores shared among the server processes
        frontends = min(8, max(0, (os.cpu_count() or 1) - 2)) // config.workers if gpu else 0
    if not gpu and config.workers > 1:  # each worker's torch threads: its share of the cores, not all of them
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // config.workers))
    # With the engines in their own process this one prepares requests and is their fallback: it stays on the CPU.
    device, host_backend = ("cpu", "eager") if config.engine_process else (config.device, backend)
    synth = Synthesizer(config.model, device=device, backend=host_backend, voices_dir=voices_dir)
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
        frontend_processes=frontends,
        batches_in_flight=depth,
    )
    return TTSService(synth, service_config)


def serve(config: ServerConfig) -> None:
    """Run until interrupted. Blocks."""
    import uvicorn

    from rtvox.server.app import create_app

    _log_setup(config)
    if config.workers > 1:
        _serve_workers(config)
        return
    service = build_service(config)
    app = create_app(service, config)
    log.info("rtvox serving model %s on http://%s:%d", service.synthesizer.model_dir, config.host, config.port)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level, access_log=False)


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
    service = build_service(config)
    log.info("worker %d serving model %s", os.getpid(), service.synthesizer.model_dir)
    return create_app(service, config)
