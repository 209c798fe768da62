"""rtvox: fast expressive voice-cloning text-to-speech.

The public API is a handful of names, imported lazily so that `import rtvox.text` never pulls in torch:
Synthesizer, Voice, SynthesisRequest, AudioChunk, SynthesisResult, load_model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Synthesizer": "rtvox.runtime.synthesizer",
    "Voice": "rtvox.runtime.types",
    "SynthesisRequest": "rtvox.runtime.types",
    "AudioChunk": "rtvox.runtime.types",
    "SynthesisResult": "rtvox.runtime.types",
    "load_model": "rtvox.runtime.synthesizer",
}

if TYPE_CHECKING:
    from rtvox.runtime.synthesizer import Synthesizer, load_model
    from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult, Voice


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rtvox' has no attribute {name!r}")


__all__ = ["AudioChunk", "SynthesisRequest", "SynthesisResult", "Synthesizer", "Voice", "load_model"]
