"""OpenAI-compatible routes: POST /v1/audio/speech, GET /v1/models and GET /v1/models/{model}."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from rtvox.audio.encode import MEDIA_TYPES
from rtvox.runtime.types import SynthesisRequest
from rtvox.server.instructions import parse_instructions
from rtvox.server.safety import require_content_type
from rtvox.server.schemas import ErrorBody, ModelList, ModelObject, SpeechRequest, VoiceRef
from rtvox.server.state import get_state, plan_request_speed
from rtvox.server.streaming import audio_body, openai_sse_body

router = APIRouter(prefix="/v1", tags=["openai"])

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "Invalid request"),
        (401, "Missing or wrong API key"),
        (404, "Unknown voice"),
        (413, "Body too large"),
        (415, "Wrong content type"),
        (429, "Queue full; see Retry-After"),
    )
}
AUDIO_CONTENT: dict[str, Any] = {media: {} for media in sorted(set(MEDIA_TYPES.values()))} | {"text/event-stream": {}}


@router.post(
    "/audio/speech",
    response_class=StreamingResponse,
    responses={200: {"content": AUDIO_CONTENT, "description": "Audio, streamed as it is made"}, **ERRORS},
    dependencies=[Depends(require_content_type("application/json"))],
    summary="Create speech (OpenAI-compatible)",
)
async def create_speech(body: SpeechRequest, request: Request) -> StreamingResponse:
    started = time.perf_counter()
    state = get_state(request)
    state.check_model(body.model)
    voice = await state.voices.resolve(body.voice.id if isinstance(body.voice, VoiceRef) else body.voice)
    timbre = await state.voices.voice_timbre(voice)
    style = parse_instructions(body.instructions)
    plan = plan_request_speed(body.speed, style.pace, exact_duration=False)
    synthesis = SynthesisRequest(
        text=body.input,
        voice=voice,
        speaker_timbre=timbre,
        emotion=style.emotion,
        emotion_alpha=style.intensity if style.emotion else 1.0,
        speed=plan.model_speed,
        max_chars=state.config.max_input_chars,
    )
    stream = await state.open_stream(synthesis, endpoint="speech", started=started, stretch=plan.stretch)
    fmt = body.response_format
    if body.stream_format == "sse":
        return StreamingResponse(
            openai_sse_body(stream, fmt, len(body.input)),
            media_type="text/event-stream",
            headers=stream.headers({"Cache-Control": "no-cache"}),
        )
    return StreamingResponse(audio_body(stream, fmt), media_type=MEDIA_TYPES[fmt], headers=stream.headers())


@router.get("/models", response_model=ModelList, responses=ERRORS, summary="List models")
async def list_models(request: Request) -> ModelList:
    state = get_state(request)
    created = int(state.service.synthesizer.model_dir.stat().st_mtime)
    return ModelList(data=[ModelObject(id=model, created=created) for model in state.model_ids()])


@router.get("/models/{model}", response_model=ModelObject, responses=ERRORS, summary="Retrieve a model")
async def retrieve_model(request: Request, model: str) -> ModelObject:
    state = get_state(request)
    state.check_model(model, status=404)
    return ModelObject(id=model, created=int(state.service.synthesizer.model_dir.stat().st_mtime))
