"""Runtime: the Synthesizer (requests → audio chunks), voices, the serving TTSService (batching, limits, fallback)."""

from rtvox.constants import DEFAULT_MODEL
from rtvox.runtime.sched_types import DeadlineExceededError, QueueFullError
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult, Voice
from rtvox.runtime.voices import VoiceStore

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
