"""Runtime: the Synthesizer (requests → audio chunks), voices and, later, scheduling, caches and fallback."""

from rtvox.runtime.synthesizer import DEFAULT_MODEL, Synthesizer
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult, Voice
from rtvox.runtime.voices import VoiceStore

__all__ = [
    "DEFAULT_MODEL",
    "AudioChunk",
    "SynthesisRequest",
    "SynthesisResult",
    "Synthesizer",
    "Voice",
    "VoiceStore",
]
