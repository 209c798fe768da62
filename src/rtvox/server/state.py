"""What every route needs, held once per app: the service, voices, metrics, limits and a private frontend."""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import math
from dataclasses import dataclass, field
from functools import cached_property

from fastapi import Request

from rtvox.constants import SPEED_MAX, SPEED_MIN
from rtvox.errors import InputError, TextError
from rtvox.runtime.types import SynthesisRequest
from rtvox.server.config import ServerConfig
from rtvox.server.consents import ConsentStore
from rtvox.server.errors import APIError
from rtvox.server.metrics import Metrics
from rtvox.server.protocol import SpeechService
from rtvox.server.schemas import API_SPEED_MAX, API_SPEED_MIN
from rtvox.server.streaming import ChunkStream
from rtvox.server.stretch import SpeedPlan, plan_speed
from rtvox.server.voices import VoiceRegistry
from rtvox.text import Frontend, FrontendResult


@dataclass
class ServerState:
    """Owns the per-app objects; the service itself is owned by whoever built the app (serve.py or a test)."""

    service: SpeechService
    config: ServerConfig
    voices: VoiceRegistry
    metrics: Metrics
    consents: ConsentStore
    started: bool = False  # the lifespan has started the service and not yet stopped it
    _frontend_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @cached_property
    def model_id(self) -> str:
        return self.service.synthesizer.model_dir.name

    @cached_property
    def _frontend(self) -> Frontend:
        # The runtime's frontend belongs to its executor thread; timestamps use their own, same lexicon.
        return Frontend(lexicon=self.service.synthesizer.frontend.lexicon)

    def model_ids(self) -> tuple[str, ...]:
        return (self.model_id, *self.config.model_aliases)

    def check_model(self, model: str, status: int = 400) -> None:
        """APIError(status) unless `model` is one this server serves (400 for a body field, 404 for a path)."""
        if model not in self.model_ids():
            raise APIError(
                status,
                f"unknown model {model!r}; use one of: {', '.join(self.model_ids())} (GET /v1/models)",
                param="model",
                code="model_not_found",
            )

    async def open_stream(
        self, request: SynthesisRequest, *, endpoint: str, started: float, stretch: float
    ) -> ChunkStream:
        """Submit `request` and wait for its first chunk (errors before it become JSON responses). Text errors name
        `input`, the runtime's (and OpenAI's) field; /v1/tts renames it to its own `text`."""
        try:
            return await ChunkStream.open(
                self.service,
                request,
                endpoint=endpoint,
                started=started,
                stretch=stretch,
                metrics=self.metrics,
                deadline_s=self.config.deadline_s,
            )
        except ValueError as exc:
            if isinstance(exc, InputError):
                raise
            # Text in scripts the model cannot speak (emoji, Greek, ...) leaves the frontend with no chunks and
            # some runtimes fail on that with a plain ValueError; check here, off the happy path, and say so.
            front = await self.frontend(request.text)
            if not front.chunks:
                skipped = "; ".join(front.warnings) or "no Chinese or English words"
                raise TextError(
                    f"the text has nothing this model can speak ({skipped}); give Chinese or English words",
                    param="input",
                ) from None
            raise

    async def frontend(self, text: str) -> FrontendResult:
        """`text` read and cut as the service cuts it (its chunk caps and first-chunk floor)."""
        chunking = getattr(self.service, "chunking", {})  # (a service without it cuts as the library does)
        async with self._frontend_lock:
            return await asyncio.to_thread(functools.partial(self._frontend.process, **chunking), text)

    def decode_clip(self, data: str, param: str) -> bytes:
        """Bytes of a base64 clip in a JSON body, checked against the upload limit."""
        limit = self.config.max_upload_bytes
        if len(data) > limit * 4 // 3 + 4:
            raise APIError(413, f"'{param}' is over the {limit}-byte clip limit; send a shorter clip", param=param)
        try:
            clip = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise APIError(400, f"'{param}' is not valid base64; encode the audio file's bytes", param=param) from None
        if not clip:
            raise APIError(400, f"'{param}' is empty; send a 3–30 s audio file", param=param)
        return clip


def plan_request_speed(speed: float, pace: float, *, exact_duration: bool) -> SpeedPlan:
    """The requested speed times the instructions' pace, kept in the API's range; model rate + stretch."""
    wanted = min(max(speed * pace, API_SPEED_MIN), API_SPEED_MAX)
    assert math.isfinite(wanted)
    if exact_duration:
        # An exact duration is the model's job; a stretch afterwards would change the length again.
        return SpeedPlan(model_speed=min(max(wanted, SPEED_MIN), SPEED_MAX), stretch=1.0)
    return plan_speed(wanted)


def get_state(request: Request) -> ServerState:
    state = request.app.state.rtvox
    assert isinstance(state, ServerState)
    return state
