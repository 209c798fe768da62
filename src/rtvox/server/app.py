"""The FastAPI app: wires the routes, errors, safety, metrics and the web page around a SpeechService.

`create_app(service, config)` does not own the service's model: the caller builds it (serve.py from flags, tests
from a tiny random model). The app starts and stops the service with its own lifespan.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rtvox.server import routes_native, routes_openai, routes_voices
from rtvox.server.config import ServerConfig
from rtvox.server.consents import ConsentStore
from rtvox.server.errors import APIError, error_response, install_error_handlers
from rtvox.server.metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from rtvox.server.protocol import SpeechService
from rtvox.server.safety import ApiKeyCheck, BodyLimitMiddleware
from rtvox.server.state import ServerState, get_state
from rtvox.server.streaming import WARNINGS_HEADER, CutStreamMiddleware
from rtvox.server.voices import VoiceRegistry

log = logging.getLogger("rtvox.server")
STATIC_DIR = Path(__file__).parent / "static"


def create_app(service: SpeechService, config: ServerConfig | None = None) -> FastAPI:
    """An app serving `service`; its lifespan starts the service (which warms its engines) and stops it."""
    config = config or ServerConfig()
    synth = service.synthesizer
    made: list[ServerState] = []  # the state, once made (the metrics registry reads readiness as it registers)
    metrics = Metrics(
        service.stats, synth.embedding_cache.stats, ready=lambda: bool(made) and made[0].started and service.ready
    )
    state = ServerState(
        service=service,
        config=config,
        voices=VoiceRegistry(
            synth, redis_url=config.redis_url, render=functools.partial(service.synthesize, internal=True)
        ),
        metrics=metrics,
        consents=ConsentStore(synth.voices.clones_dir / "consents"),
    )
    made.append(state)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.start()
        state.started = True
        # under server workers: this worker's runtime figures, for the /metrics of whichever worker is scraped
        publisher = asyncio.get_running_loop().create_task(metrics.publish()) if metrics.shared_dir else None
        try:
            yield
        finally:
            state.started = False
            if publisher is not None:
                publisher.cancel()
                metrics.retire()
            await state.voices.close()
            await service.stop()

    app = FastAPI(
        title="rtvox",
        version="0.1.0",
        summary="Expressive zh/en text-to-speech: OpenAI-compatible speech API, voice cloning, native controls",
        lifespan=lifespan,
        # FastAPI's Swagger UI and ReDoc pages load their code from a CDN and render blank offline: /docs is ours.
        docs_url=None,
        redoc_url=None,
    )
    app.state.rtvox = state
    api_routes = [*routes_openai.router.routes, *routes_voices.router.routes, *routes_native.router.routes]
    key_check = ApiKeyCheck(config.api_keys)
    install_error_handlers(app, api_routes, auth=key_check)
    auth = [Depends(key_check)]
    app.include_router(routes_openai.router, dependencies=auth)
    app.include_router(routes_voices.router, dependencies=auth)
    app.include_router(routes_native.router, dependencies=auth)
    _add_operator_routes(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # Each add wraps the ones before: metrics see every response (413s and CORS preflights included).
    app.add_middleware(HeadAsGetMiddleware)
    app.add_middleware(CutStreamMiddleware)
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=[WARNINGS_HEADER],  # pages may read what of their text was left out
            max_age=600,
        )
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=api_routes)
    return app


def _add_operator_routes(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(STATIC_DIR / "docs.html", media_type="text/html")

    @app.get("/health", summary="Liveness: the process answers")
    async def health(request: Request) -> dict[str, Any]:
        state = get_state(request)
        return {"status": "ok", "worker": os.getpid(), "service": state.service.health()}

    @app.get("/ready", summary="Readiness: engines loaded and warm", responses={503: {"description": "Not ready"}})
    async def ready(request: Request) -> JSONResponse:
        state = get_state(request)
        if not (state.started and state.service.ready):
            return error_response(
                APIError(503, "not ready: the engines are still loading or warming up", type="server_error",
                         code="not_ready", headers={"Retry-After": "1"})
            )  # fmt: skip
        body: dict[str, Any] = {"ready": True, "model": state.model_id}
        expected = state.config.workers or 1
        if state.metrics.shared_dir is not None and expected > 1:
            # under `rtvox serve --workers N` any worker may answer: ready means every worker is, so a load
            # balancer or a deploy script that waits for 200 never sends work to a server still half warm
            ready, alive = state.metrics.runtime.workers_ready()
            body["workers"] = {"ready": ready, "expected": expected}
            if ready < expected:
                return error_response(
                    APIError(503, f"not ready: {ready} of {expected} worker processes are loaded and warm "
                             f"({alive} started)", type="server_error", code="not_ready",
                             headers={"Retry-After": "1"})
                )  # fmt: skip
        return JSONResponse(body)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def metrics(request: Request) -> Response:
        return Response(get_state(request).metrics.exposition(), media_type=CONTENT_TYPE)


class HeadAsGetMiddleware:
    """HEAD wherever GET works (HTTP asks it of servers; uptime probes and `curl -I` use it): the request runs as
    a GET and the response keeps its status and headers (Content-Length included) and loses its body. FastAPI's
    routes take only the methods they name; the middlewares outside this one still see HEAD."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        inner = {**scope, "method": "GET"}
        try:
            await self.app(inner, receive, headers_only)
        finally:
            if "route" in inner:  # what the router matched, for the metrics outside (they label by route)
                scope["route"] = inner["route"]
