"""POST /v1/tts: the native endpoint with every control the model has, and word/phoneme timestamps."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from rtvox.audio.encode import MEDIA_TYPES
from rtvox.audio.reference import prepare_reference
from rtvox.constants import SAMPLE_RATE
from rtvox.errors import InputError
from rtvox.runtime.types import SynthesisRequest
from rtvox.server.errors import APIError
from rtvox.server.instructions import Style, parse_instructions
from rtvox.server.routes_openai import AUDIO_CONTENT, ERRORS
from rtvox.server.safety import require_content_type
from rtvox.server.schemas import TTSRequest, TTSResult
from rtvox.server.state import ServerState, get_state, plan_request_speed
from rtvox.server.streaming import audio_body, collect, native_sse_body
from rtvox.server.timestamps import Timeline

router = APIRouter(prefix="/v1", tags=["native"])


@router.post(
    "/tts",
    response_class=StreamingResponse,
    response_model=None,
    responses={
        200: {
            "content": AUDIO_CONTENT | {"application/json": {"schema": TTSResult.model_json_schema()}},
            "description": "Audio bytes (stream_format=audio), SSE events (sse) or one JSON document (json)",
        },
        **ERRORS,
    },
    dependencies=[Depends(require_content_type("application/json"))],
    summary="Synthesize with full control (emotion, references, duration, timestamps)",
)
async def tts(body: TTSRequest, request: Request) -> StreamingResponse | JSONResponse:
    started = time.perf_counter()
    state = get_state(request)
    _check_combinations(body)
    with _text_field_is_text():
        synthesis, stretch = await _build_request(body, state)
        timeline = Timeline(await state.frontend(body.text)) if body.timestamps else None
        stream = await state.open_stream(synthesis, endpoint="tts", started=started, stretch=stretch)
    fmt = body.response_format
    if body.stream_format == "sse":
        return StreamingResponse(
            native_sse_body(stream, fmt, timeline),
            media_type="text/event-stream",
            headers=stream.headers({"Cache-Control": "no-cache"}),
        )
    if body.stream_format == "json":
        data = await collect(stream, fmt, None if timeline is None else timeline.add)
        result = TTSResult(
            audio=base64.b64encode(data).decode(),
            format=fmt,
            sample_rate=SAMPLE_RATE,
            duration=round(stream.audio_seconds, 6),
            words=None if timeline is None else timeline.words,
            phonemes=None if timeline is None else timeline.phonemes,
            warnings=list(stream.warnings) or None,
        )
        return JSONResponse(result.model_dump(exclude_none=True), headers=stream.headers())
    return StreamingResponse(audio_body(stream, fmt), media_type=MEDIA_TYPES[fmt], headers=stream.headers())


@contextmanager
def _text_field_is_text() -> Iterator[None]:
    """The runtime and the frontend call the text `input` (OpenAI's field); this endpoint's field is `text`."""
    try:
        yield
    except InputError as exc:
        if exc.param == "input":
            exc.param = "text"
        raise


def _check_combinations(body: TTSRequest) -> None:
    if body.voice is not None and body.speaker_reference is not None:
        raise APIError(400, "give either 'voice' or 'speaker_reference', not both", param="speaker_reference")
    if body.emotion is not None and body.emotion_reference is not None:
        raise APIError(400, "give either 'emotion' or 'emotion_reference', not both", param="emotion_reference")
    if body.timestamps and body.stream_format == "audio":
        raise APIError(
            400,
            "timestamps need stream_format 'json' or 'sse' (raw audio has nowhere to put them)",
            param="timestamps",
        )


async def _build_request(body: TTSRequest, state: ServerState) -> tuple[SynthesisRequest, float]:
    """The runtime request and the stretch factor still to apply to its audio."""
    speaker: np.ndarray | None = None
    voice: str | None = None
    if body.speaker_reference is not None:
        clip = state.decode_clip(body.speaker_reference, "speaker_reference")
        speaker, timbre = await state.voices.profile(clip, param="speaker_reference")
    else:
        voice = await state.voices.resolve(body.voice)
        timbre = await state.voices.voice_timbre(voice)
    emotion_ref: np.ndarray | None = None
    if body.emotion_reference is not None:
        clip = state.decode_clip(body.emotion_reference, "emotion_reference")
        emotion_ref = await asyncio.to_thread(prepare_reference, clip, sr=SAMPLE_RATE, param="emotion_reference")
    style = parse_instructions(body.instructions)
    if body.emotion is not None or emotion_ref is not None:
        style = Style(pace=style.pace)  # an explicit emotion wins over the instructions' one
    alpha = body.emotion_alpha
    if alpha is None:
        alpha = style.intensity if style.emotion else 1.0
    plan = plan_request_speed(body.speed, style.pace, exact_duration=body.duration is not None)
    request = SynthesisRequest(
        text=body.text,
        voice=voice,
        speaker_embedding=speaker,
        speaker_timbre=timbre,
        emotion=body.emotion or style.emotion,
        emotion_ref=emotion_ref,
        emotion_alpha=alpha,
        speed=plan.model_speed,
        duration=body.duration,
        pitch_scale=body.pitch_scale,
        energy_scale=body.energy_scale,
        seed=body.seed,
        max_chars=state.config.max_input_chars,
    )
    return request, plan.stretch
