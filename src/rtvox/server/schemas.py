"""Request and response bodies of the HTTP API (pydantic), shared by the OpenAI-compatible and native routes."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rtvox.constants import (
    AUDIO_FORMATS,
    EMOTION_ALPHA_MAX,
    EMOTIONS,
    MAX_INPUT_CHARS,
    MAX_TARGET_SECONDS,
    MIN_TARGET_SECONDS,
)

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
assert set(get_args(ResponseFormat)) == set(AUDIO_FORMATS), "ResponseFormat must list rtvox.constants.AUDIO_FORMATS"

# OpenAI's speed range; the model itself takes SPEED_MIN..SPEED_MAX and the server time-stretches the rest.
API_SPEED_MIN = 0.25
API_SPEED_MAX = 4.0
MAX_INSTRUCTIONS_CHARS = 4096
MAX_NAME_CHARS = 128
EMOTION_PATTERN = "^(" + "|".join(EMOTIONS) + ")$"
# Voice names and ids reach the voice store only after its own check; this keeps hostile strings out of logs too.
VOICE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class VoiceRef(BaseModel):
    """A custom voice given as an object, as OpenAI's client sends it: {"id": "voice_..."}."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(max_length=64, description="A cloned voice id from POST /v1/audio/voices")


class SpeechRequest(BaseModel):
    """POST /v1/audio/speech, as OpenAI's API."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)  # NaN/Infinity: "should be a finite number"
    model: str = Field(max_length=128, description="tts-1, tts-1-hd, gpt-4o-mini-tts or the loaded rtvox model")
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS, description="Text to speak (zh, en or mixed)")
    voice: Annotated[str, Field(max_length=MAX_NAME_CHARS)] | VoiceRef = Field(
        description="A built-in voice, an OpenAI voice name (mapped to a built-in) or a cloned voice id"
    )  # bounded as /v1/tts's: an unknown voice is quoted back in the error message
    instructions: str | None = Field(
        default=None,
        max_length=MAX_INSTRUCTIONS_CHARS,
        description="Free-text style, e.g. 'say it angrily' or '用开心的语气'; sets emotion and intensity",
    )
    response_format: ResponseFormat = "mp3"
    # strict numbers and flags (here and in TTSRequest), as OpenAI's API takes them: a lax parse reads "speed": true
    # as 1.0 and "speed": "2" as 2.0, answering 200 to a request whose field the client got wrong
    speed: float = Field(default=1.0, ge=API_SPEED_MIN, le=API_SPEED_MAX, strict=True)
    stream_format: Literal["audio", "sse"] = "audio"


class TTSRequest(BaseModel):
    """POST /v1/tts, the native endpoint with every control the model has."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    text: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    voice: str | None = Field(
        default=None, max_length=MAX_NAME_CHARS, description="Built-in, OpenAI name, cloned voice id or its label"
    )
    speaker_reference: str | None = Field(
        default=None, description="Base64 of a 3–30 s audio file to clone the voice from (instead of `voice`)"
    )
    emotion: str | None = Field(default=None, pattern=EMOTION_PATTERN, description=", ".join(EMOTIONS))
    emotion_reference: str | None = Field(
        default=None, description="Base64 of a 3–30 s audio file whose emotion to imitate"
    )
    emotion_alpha: float | None = Field(
        default=None,
        ge=0.0,
        le=EMOTION_ALPHA_MAX,
        strict=True,
        description="Emotion strength (default 1: the model's calibrated default for the label; or from instructions)",
    )
    instructions: str | None = Field(
        default=None, max_length=MAX_INSTRUCTIONS_CHARS, description="Free-text style used when no emotion is given"
    )
    speed: float = Field(default=1.0, ge=API_SPEED_MIN, le=API_SPEED_MAX, strict=True)
    duration: float | None = Field(
        default=None,
        ge=MIN_TARGET_SECONDS,
        le=MAX_TARGET_SECONDS,
        description="Exact output length in seconds",
        strict=True,
    )
    pitch_scale: float = Field(default=1.0, ge=0.0, le=3.0, strict=True)
    energy_scale: float = Field(default=1.0, ge=0.0, le=3.0, strict=True)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, strict=True)
    response_format: ResponseFormat = "wav"
    stream_format: Literal["audio", "sse", "json"] = Field(
        default="audio", description="audio: raw bytes as made; sse: events per chunk; json: one document"
    )
    timestamps: bool = Field(
        default=False, description="Word and phoneme times (stream_format sse or json)", strict=True
    )

    @field_validator("emotion", mode="before")
    @classmethod
    def _emotion_label(cls, value: object) -> object:  # "Happy", " angry " name the same label as "happy"
        return value.strip().lower() if isinstance(value, str) else value


class WordTime(BaseModel):
    text: str
    start: float  # seconds from the start of the utterance
    end: float


class PhonemeTime(BaseModel):
    phoneme: str
    start: float
    end: float


class TTSResult(BaseModel):
    """The body of POST /v1/tts with stream_format=json."""

    audio: str  # base64 of the whole file in `format`
    format: str
    sample_rate: int
    duration: float  # seconds
    words: list[WordTime] | None = None
    phonemes: list[PhonemeTime] | None = None
    warnings: list[str] | None = None  # what of the text was not spoken, and why (also the X-Rtvox-Warnings header)


class VoiceObject(BaseModel):
    """One voice, in OpenAI's shape plus rtvox's fields."""

    id: str
    object: Literal["audio.voice"] = "audio.voice"
    name: str
    type: Literal["builtin", "audio_sample"]
    created_at: int
    gender: str = "unknown"
    language: str = ""
    description: str = ""


class VoiceList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VoiceObject]
    openai_aliases: dict[str, str]  # OpenAI voice name → the built-in it maps to


class VoiceDeleted(BaseModel):
    id: str
    object: Literal["audio.voice.deleted"] = "audio.voice.deleted"
    deleted: bool = True


CONSENT_ID_PREFIX = "cons_"
CONSENT_PATTERN = r"^cons_[0-9a-f]{16}$"
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$"  # a BCP 47 tag's shape: en, en-US, zh-Hans-CN


class VoiceConsent(BaseModel):
    """A consent recording (OpenAI's custom-voice flow: consent first, then the voice with its id)."""

    id: str
    object: Literal["audio.voice_consent"] = "audio.voice_consent"
    name: str
    language: str
    created_at: int


class VoiceConsentList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VoiceConsent]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None


class VoiceConsentUpdate(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, description="A new label")]


class VoiceConsentDeleted(BaseModel):
    id: str
    object: Literal["audio.voice_consent"] = "audio.voice_consent"
    deleted: bool = True


class ModelObject(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "rtvox"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelObject]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail
