"""`rtvox serve`: load the model, build the runtime service, and run the app under uvicorn."""

from __future__ import annotations

import logging

from rtvox.server.config import ServerConfig
from rtvox.server.protocol import SpeechService

log = logging.getLogger("rtvox.server")


def build_service(config: ServerConfig) -> SpeechService:
    """The real TTSService for `config`: a Synthesizer on the chosen device, with a CPU fallback on GPUs."""
    from pathlib import Path

    from rtvox.runtime.service import ServiceConfig, TTSService
    from rtvox.runtime.synthesizer import Synthesizer

    voices_dir = Path(config.voices_dir) if config.voices_dir else None
    # With the engines in their own process this one prepares requests and is their fallback: it stays on the CPU.
    device, backend = ("cpu", "eager") if config.engine_process else (config.device, config.backend)
    synth = Synthesizer(config.model, device=device, backend=backend, voices_dir=voices_dir)
    service_config = ServiceConfig(
        max_batch=config.max_batch,
        max_wait_ms=config.max_wait_ms,
        max_queue=config.max_queue,
        max_chars=config.max_input_chars,
        default_deadline_s=config.deadline_s,
        # A CPU primary has nothing to fall back to; a GPU one falls back to the same weights on the CPU.
        fallback_device="cpu" if config.engine_process or synth.device.type != "cpu" else None,
        engine_process=f"{config.device}:{config.backend}" if config.engine_process else None,
        redis_url=config.redis_url,
        first_chunk_wait_ms=config.first_chunk_wait_ms,
        frontend_processes=config.frontend_processes,
        batches_in_flight=config.batches_in_flight,
    )
    return TTSService(synth, service_config)


def serve(config: ServerConfig) -> None:
    """Run until interrupted. Blocks."""
    import uvicorn

    from rtvox.server.app import create_app

    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    service = build_service(config)
    app = create_app(service, config)
    log.info("rtvox serving model %s on http://%s:%d", service.synthesizer.model_dir, config.host, config.port)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level, access_log=False)
