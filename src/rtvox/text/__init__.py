"""Text frontend: normalization, language segmentation, G2P (zh, en), phoneme vocabulary, chunking.

Never imports torch. Public names: Frontend, FrontendResult, Token, Chunk, Vocabulary, Lexicon.
"""

from __future__ import annotations

from rtvox.text.frontend import Frontend
from rtvox.text.lexicon import Lexicon
from rtvox.text.result import Chunk, FrontendResult, Token
from rtvox.text.vocab import Vocabulary

__all__ = ["Chunk", "Frontend", "FrontendResult", "Lexicon", "Token", "Vocabulary"]
