"""Runtime: the Synthesizer (requests → audio chunks), voices, the serving TTSService (batching, limits, fallback).

The names below load on first use, so a submodule that needs none of them (rtvox.runtime.ar, the AR decode
engine) imports without the audio stack (soundfile, pyloudnorm), as on the bare GPU image benchmarks run on."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rtvox.constants import DEFAULT_MODEL
    from rtvox.runtime.sched_types import DeadlineExceededError, QueueFullError
    from rtvox.runtime.service import ServiceConfig, TTSService
    from rtvox.runtime.synthesizer import Synthesizer
    from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult, Voice
    from rtvox.runtime.voices import VoiceStore

_HOMES = {
    "DEFAULT_MODEL": "rtvox.constants",
    "AudioChunk": "rtvox.runtime.types",
    "DeadlineExceededError": "rtvox.runtime.sched_types",
    "QueueFullError": "rtvox.runtime.sched_types",
    "ServiceConfig": "rtvox.runtime.service",
    "SynthesisRequest": "rtvox.runtime.types",
    "SynthesisResult": "rtvox.runtime.types",
    "Synthesizer": "rtvox.runtime.synthesizer",
    "TTSService": "rtvox.runtime.service",
    "Voice": "rtvox.runtime.types",
    "VoiceStore": "rtvox.runtime.voices",
}

__all__ = [
    "DEFAULT_MODEL",
    "AudioChunk",
    "DeadlineExceededError",
    "QueueFullError",
    "ServiceConfig",
    "SynthesisRequest",
    "SynthesisResult",
    "Synthesizer",
    "TTSService",
    "Voice",
    "VoiceStore",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'rtvox.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
