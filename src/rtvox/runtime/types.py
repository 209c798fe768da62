"""Plain data exchanged between the runtime, the CLI and (later) the server. No torch here."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from rtvox.constants import (
    EMOTION_ALPHA_MAX,
    EMOTIONS,
    MAX_INPUT_CHARS,
    MAX_TARGET_SECONDS,
    MIN_TARGET_SECONDS,
    N_MELS,
    SAMPLE_RATE,
    SPEAKER_EMBED_DIM,
    SPEED_MAX,
    SPEED_MIN,
    TIMBRE_LIMIT,
)
from rtvox.errors import InputError, TextError


@dataclass(frozen=True)
class Voice:
    """A speaker identity: a GE2E embedding plus descriptive metadata.

    Built-in voices come with the model directory; cloned voices are made from a reference clip.
    """

    name: str  # built-in name or clone id; safe as a file name (validated by VoiceStore)
    embedding: np.ndarray  # float32 [SPEAKER_EMBED_DIM], unit norm
    language: str = "zh,en"  # languages the voice was heard speaking, comma separated
    gender: str = "unknown"  # "female" | "male" | "unknown"
    description: str = ""
    builtin: bool = True  # False for clones (they can be deleted)
    # a clone's reference clip's speech spectrum (mean log-mel [N_MELS], rtvox.runtime.timbre), from which a model
    # derives the clone's timbre offset; None: none (built-ins, clones made before timbre matching)
    spectrum: np.ndarray | None = None

    def __post_init__(self) -> None:
        emb = np.asarray(self.embedding, dtype=np.float32).reshape(-1)
        if emb.shape[0] != SPEAKER_EMBED_DIM or not np.all(np.isfinite(emb)):
            raise InputError(f"voice {self.name!r} has a bad embedding (need {SPEAKER_EMBED_DIM} finite values)")
        object.__setattr__(self, "embedding", emb)
        if self.spectrum is not None:
            spec = np.asarray(self.spectrum, dtype=np.float32).reshape(-1)
            if spec.shape[0] != N_MELS or not np.all(np.isfinite(spec)):
                raise InputError(f"voice {self.name!r} has a bad spectrum (need {N_MELS} finite values)")
            object.__setattr__(self, "spectrum", spec)


@dataclass(frozen=True)
class SynthesisRequest:
    """One request's settings. Optional fields fall back to the voice's or model's defaults."""

    text: str  # raw user text, normalized by the frontend
    voice: str | None = None  # voice name or clone id; None → the model's default voice
    speaker_embedding: np.ndarray | None = None  # a GE2E embedding to use instead of a named voice
    # the clone's timbre offset [N_MELS] added to its mel (Synthesizer.speaker_timbre / speaker_profile); None: none
    speaker_timbre: np.ndarray | None = None
    emotion: str | None = None  # label from EMOTIONS; None → neutral
    emotion_ref: np.ndarray | None = None  # reference clip (float32 mono at SAMPLE_RATE) for emotion
    emotion_alpha: float = 1.0  # weight of the emotion part of the condition (0 = voice's neutral style)
    speed: float = 1.0  # speaking-rate multiplier, SPEED_MIN..SPEED_MAX
    duration: float | None = None  # exact target length of the whole utterance in seconds
    pitch_scale: float = 1.0  # multiplies the predicted pitch contour's deviation
    energy_scale: float = 1.0  # multiplies the predicted energy
    seed: int | None = None  # reserved for stochastic models; the FastSpeech2 family is deterministic
    max_chars: int = MAX_INPUT_CHARS  # limit on len(text), the runtime's guard

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TextError("text must be a string", param="input")
        if len(self.text) > self.max_chars:
            raise TextError(
                f"text is {len(self.text)} characters, over the limit of {self.max_chars}; split it into "
                "several requests or use offline mode",
                param="input",
            )
        for name, lo, hi in (
            ("speed", SPEED_MIN, SPEED_MAX),
            ("emotion_alpha", 0.0, EMOTION_ALPHA_MAX),
            ("pitch_scale", 0.0, 3.0),
            ("energy_scale", 0.0, 3.0),
            ("duration", MIN_TARGET_SECONDS, MAX_TARGET_SECONDS),
        ):
            if name != "duration" or self.duration is not None:
                object.__setattr__(self, name, _check_range(name, getattr(self, name), lo, hi))
        if self.voice is not None and not isinstance(self.voice, str):
            raise InputError(f"voice must be a voice name or clone id (a string), got {self.voice!r}", param="voice")
        if self.speaker_embedding is not None:
            object.__setattr__(self, "speaker_embedding", _unit_embedding(self.speaker_embedding))
        if self.speaker_timbre is not None:
            object.__setattr__(self, "speaker_timbre", check_timbre(self.speaker_timbre))
        if self.emotion is not None and self.emotion not in EMOTIONS:
            raise InputError(f"unknown emotion {self.emotion!r}; use one of: {', '.join(EMOTIONS)}", param="emotion")


def _check_range(name: str, value: object, lo: float, hi: float) -> float:
    """`value` as a float when it is a finite real number (numpy scalars too, not a bool) within [lo, hi]."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if not number or not math.isfinite(float(value)) or not lo <= float(value) <= hi:  # type: ignore[arg-type]
        raise InputError(f"{name} must be a number from {lo} to {hi}, got {value!r}", param=name)
    return float(value)  # type: ignore[arg-type]


def check_timbre(value: object, param: str = "speaker_timbre") -> np.ndarray:
    """A timbre offset as float32 [N_MELS], finite and within ±TIMBRE_LIMIT; InputError naming `param` otherwise."""
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape[0] != N_MELS or not np.all(np.isfinite(arr)) or float(np.max(np.abs(arr))) > TIMBRE_LIMIT:
        raise InputError(
            f"{param} must be {N_MELS} finite numbers within ±{TIMBRE_LIMIT:g} (a per-band log-mel offset, e.g. "
            "from Synthesizer.speaker_timbre)",
            param=param,
        )
    return arr.astype(np.float32)


def _unit_embedding(value: object) -> np.ndarray:
    """A speaker embedding as float32 [SPEAKER_EMBED_DIM] of unit norm (as the GE2E encoder gives them)."""
    try:
        emb = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        emb = np.zeros(0)
    norm = float(np.linalg.norm(emb)) if emb.size and np.all(np.isfinite(emb)) else 0.0
    if emb.shape[0] != SPEAKER_EMBED_DIM or not math.isfinite(norm) or norm <= 0.0:
        raise InputError(
            f"speaker_embedding must be {SPEAKER_EMBED_DIM} finite numbers, not all zero (a GE2E embedding, e.g. "
            "from Synthesizer.embed_speaker)",
            param="speaker_embedding",
        )
    if abs(norm - 1.0) < 1e-4:  # already an encoder's output: kept bit for bit (cache keys, equality)
        return np.asarray(value, dtype=np.float32).reshape(-1)
    return (emb / norm).astype(np.float32)


@dataclass(frozen=True)
class AudioChunk:
    """One piece of a streamed utterance, yielded as soon as its chunk of text is vocoded."""

    index: int  # 0-based position in the stream
    audio: np.ndarray  # float32 mono in [-1, 1]
    text: str  # the normalized text this chunk speaks
    is_last: bool  # True on the final chunk of the request
    sample_rate: int = SAMPLE_RATE
    phonemes: tuple[str, ...] = field(default=())  # the chunk's phoneme sequence, boundary tokens included
    durations: tuple[int, ...] = field(default=())  # mel frames per phoneme, aligned with `phonemes`
    # what the frontend left out of the request's text and why (first chunk only; e.g. a script rtvox cannot read)
    warnings: tuple[str, ...] = field(default=())

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


@dataclass(frozen=True)
class SynthesisResult:
    """A whole utterance: the concatenated chunks and their timing."""

    audio: np.ndarray  # float32 mono
    sample_rate: int
    chunks: tuple[AudioChunk, ...]

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate
