"""Text frontend: normalization, language segmentation, G2P (zh, en), phoneme vocabulary, chunking.

Never imports torch. Public names: Frontend, FrontendResult, Token, Chunk, Vocabulary, Lexicon — imported
lazily, so `rtvox.text.vocab` works where the G2P libraries are not installed (the GPU training image).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Frontend": "rtvox.text.frontend",
    "Lexicon": "rtvox.text.lexicon",
    "Chunk": "rtvox.text.result",
    "FrontendResult": "rtvox.text.result",
    "Token": "rtvox.text.result",
    "Vocabulary": "rtvox.text.vocab",
}

if TYPE_CHECKING:
    from rtvox.text.frontend import Frontend
    from rtvox.text.lexicon import Lexicon
    from rtvox.text.result import Chunk, FrontendResult, Token
    from rtvox.text.vocab import Vocabulary


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rtvox.text' has no attribute {name!r}")


__all__ = ["Chunk", "Frontend", "FrontendResult", "Lexicon", "Token", "Vocabulary"]
