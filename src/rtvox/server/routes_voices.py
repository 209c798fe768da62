"""Voice routes: list, clone from an uploaded clip (multipart), delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Path, Request, UploadFile

from rtvox.server.errors import APIError
from rtvox.server.routes_openai import ERRORS
from rtvox.server.safety import require_content_type
from rtvox.server.schemas import MAX_NAME_CHARS, VOICE_PATTERN, VoiceDeleted, VoiceList, VoiceObject
from rtvox.server.state import get_state

router = APIRouter(prefix="/v1/audio", tags=["voices"])

# Media types accepted for a reference clip; browsers and curl label the same files in several ways.
CLIP_TYPES = ("audio/", "video/webm", "video/ogg", "application/octet-stream", "application/ogg")
READ_BLOCK = 64 * 1024


@router.get("/voices", response_model=VoiceList, responses=ERRORS, summary="List voices")
async def list_voices(request: Request) -> VoiceList:
    state = get_state(request)
    return VoiceList(data=await state.voices.list(), openai_aliases=dict(state.voices.aliases))


@router.post(
    "/voices",
    response_model=VoiceObject,
    responses=ERRORS,
    dependencies=[Depends(require_content_type("multipart/form-data"))],
    summary="Clone a voice from a 3–30 s reference clip",
)
async def create_voice(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=MAX_NAME_CHARS, description="A label for the voice")],
    audio_sample: Annotated[UploadFile, File(description="3–30 s of one speaker: wav, flac, mp3, ogg, m4a, webm")],
    consent: Annotated[str | None, Form(max_length=256, description="Accepted for OpenAI compatibility")] = None,
) -> VoiceObject:
    state = get_state(request)
    media = (audio_sample.content_type or "application/octet-stream").lower()
    if not media.startswith(CLIP_TYPES):
        raise APIError(
            415,
            f"audio_sample has Content-Type {media!r}; upload an audio file (audio/wav, audio/mpeg, ...)",
            param="audio_sample",
            code="unsupported_media_type",
        )
    clip = await _read_limited(audio_sample, state.config.max_upload_bytes)
    if not clip:
        message = "audio_sample is empty; upload 3–30 s of speech"
        raise APIError(400, message, param="audio_sample", code="invalid_audio")
    label = name.strip()
    if not label or not label.isprintable():
        raise APIError(400, "name must be printable text, not blank", param="name", code="invalid_value")
    return await state.voices.clone(label, clip)


async def _read_limited(upload: UploadFile, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while block := await upload.read(READ_BLOCK):
        size += len(block)
        if size > limit:
            raise APIError(
                413,
                f"audio_sample is over the {limit}-byte limit; upload a shorter clip",
                param="audio_sample",
                code="request_too_large",  # as the body limit's 413
            )
        parts.append(block)
    return b"".join(parts)


@router.delete("/voices/{voice_id}", response_model=VoiceDeleted, responses=ERRORS, summary="Delete a cloned voice")
async def delete_voice(
    request: Request, voice_id: Annotated[str, Path(pattern=VOICE_PATTERN, description="A cloned voice id")]
) -> VoiceDeleted:
    await get_state(request).voices.delete(voice_id)
    return VoiceDeleted(id=voice_id)
