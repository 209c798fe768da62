"""Voice routes: list, clone from an uploaded clip (multipart), delete; consent recordings (OpenAI's flow)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Path, Query, Request, UploadFile
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from rtvox.audio import decode_audio
from rtvox.errors import InputError
from rtvox.server.errors import APIError
from rtvox.server.routes_openai import ERRORS
from rtvox.server.safety import require_content_type
from rtvox.server.schemas import (
    CONSENT_PATTERN,
    LANGUAGE_PATTERN,
    MAX_NAME_CHARS,
    VOICE_PATTERN,
    VoiceConsent,
    VoiceConsentDeleted,
    VoiceConsentList,
    VoiceConsentUpdate,
    VoiceDeleted,
    VoiceList,
    VoiceObject,
)
from rtvox.server.state import get_state

router = APIRouter(prefix="/v1/audio", tags=["voices"])

# Media types accepted for a reference clip; browsers and curl label the same files in several ways.
CLIP_TYPES = ("audio/", "video/webm", "video/ogg", "application/octet-stream", "application/ogg")
READ_BLOCK = 64 * 1024


def _audio_sample_only(value: object) -> object:
    if value == "prompt":
        raise PydanticCustomError(
            "prompt_voice", "voices made from a text prompt are not supported; upload an audio_sample (3–30 s) instead"
        )
    return value


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
    *,
    # first, so that a prompt-voice request (OpenAI's type "prompt", no audio_sample) is told why it cannot work
    type: Annotated[
        Literal["audio_sample"],
        BeforeValidator(_audio_sample_only),
        Form(description="audio_sample only: rtvox clones voices from audio, not from text prompts"),
    ] = "audio_sample",
    name: Annotated[str, Form(min_length=1, max_length=MAX_NAME_CHARS, description="A label for the voice")],
    audio_sample: Annotated[UploadFile, File(description="3–30 s of one speaker: wav, flac, mp3, ogg, m4a, webm")],
    consent: Annotated[
        str | None,
        Form(
            max_length=256,
            description="A consent id from POST /v1/audio/voice_consents (checked); other values are accepted as given",
        ),
    ] = None,
) -> VoiceObject:
    state = get_state(request)
    if consent is not None and re.fullmatch(CONSENT_PATTERN, consent) and not state.consents.exists(consent):
        raise APIError(
            400,
            f"consent {consent!r} does not exist; upload the recording with POST /v1/audio/voice_consents first",
            param="consent",
            code="consent_not_found",
        )
    _check_media(audio_sample, "audio_sample")
    clip = await _read_limited(audio_sample, state.config.max_upload_bytes)
    if not clip:
        message = "audio_sample is empty; upload 3–30 s of speech"
        raise APIError(400, message, param="audio_sample", code="invalid_audio")
    return await state.voices.clone(_label(name), clip)


def _label(name: str) -> str:
    label = name.strip()
    if not label or not label.isprintable():
        raise APIError(400, "name must be printable text, not blank", param="name", code="invalid_value")
    return label


def _check_media(upload: UploadFile, param: str) -> None:
    media = (upload.content_type or "application/octet-stream").lower()
    if not media.startswith(CLIP_TYPES):
        raise APIError(
            415,
            f"{param} has Content-Type {media!r}; upload an audio file (audio/wav, audio/mpeg, ...)",
            param=param,
            code="unsupported_media_type",
        )


async def _read_limited(upload: UploadFile, limit: int, param: str = "audio_sample") -> bytes:
    parts: list[bytes] = []
    size = 0
    while block := await upload.read(READ_BLOCK):
        size += len(block)
        if size > limit:
            raise APIError(
                413,
                f"{param} is over the {limit}-byte limit; upload a shorter clip",
                param=param,
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


# ---------------------------------------------------------------------------------------------- consents
CONSENT_MAX_SECONDS = 60.0  # a consent phrase takes seconds; more is refused before it is decoded further
ConsentId = Annotated[str, Path(pattern=CONSENT_PATTERN, description="A consent id (cons_…)")]


@router.post(
    "/voice_consents",
    response_model=VoiceConsent,
    responses=ERRORS,
    dependencies=[Depends(require_content_type("multipart/form-data"))],
    summary="Upload a consent recording (then create the voice with its id)",
)
async def create_consent(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=MAX_NAME_CHARS, description="A label for the consent")],
    language: Annotated[
        str, Form(max_length=35, pattern=LANGUAGE_PATTERN, description="BCP 47 tag of the phrase, e.g. en-US")
    ],
    recording: Annotated[UploadFile, File(description="The speaker reading the consent phrase")],
) -> VoiceConsent:
    state = get_state(request)
    _check_media(recording, "recording")
    audio = await _read_limited(recording, state.config.max_upload_bytes, "recording")
    try:  # kept as uploaded, but only if it is audio
        wav, sr = decode_audio(audio, max_seconds=CONSENT_MAX_SECONDS, param="recording", label="recording")
    except InputError as exc:
        raise APIError(400, str(exc), param="recording", code="invalid_audio") from None
    if len(wav) < sr // 2:
        raise APIError(400, "recording holds under 0.5 s of audio; upload the spoken consent phrase",
                       param="recording", code="invalid_audio")  # fmt: skip
    return state.consents.create(_label(name), language, audio)


@router.get("/voice_consents", response_model=VoiceConsentList, responses=ERRORS, summary="List consent recordings")
async def list_consents(
    request: Request,
    after: Annotated[str | None, Query(pattern=CONSENT_PATTERN, description="List after this consent id")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="At most this many")] = 20,
) -> VoiceConsentList:
    consents = get_state(request).consents.list()
    if after is not None:
        ids = [c.id for c in consents]
        if after not in ids:
            raise APIError(400, f"after names no voice consent ({after!r})", param="after", code="invalid_value")
        consents = consents[ids.index(after) + 1 :]
    page = consents[:limit]
    return VoiceConsentList(
        data=page,
        has_more=len(consents) > limit,
        first_id=page[0].id if page else None,
        last_id=page[-1].id if page else None,
    )


@router.get("/voice_consents/{consent_id}", response_model=VoiceConsent, responses=ERRORS, summary="A consent")
async def get_consent(request: Request, consent_id: ConsentId) -> VoiceConsent:
    return get_state(request).consents.get(consent_id)


@router.post("/voice_consents/{consent_id}", response_model=VoiceConsent, responses=ERRORS, summary="Rename a consent")
async def update_consent(request: Request, consent_id: ConsentId, body: VoiceConsentUpdate) -> VoiceConsent:
    return get_state(request).consents.rename(consent_id, _label(body.name))


@router.delete(
    "/voice_consents/{consent_id}", response_model=VoiceConsentDeleted, responses=ERRORS, summary="Delete a consent"
)
async def delete_consent(request: Request, consent_id: ConsentId) -> VoiceConsentDeleted:
    get_state(request).consents.delete(consent_id)
    return VoiceConsentDeleted(id=consent_id)
