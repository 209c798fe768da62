"""What the frontend returns: tokens (one per word) and chunks (what the model synthesizes, one at a time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Token:
    """One word of the normalized text: a jieba word (zh), an English word (en), or an unspeakable run."""

    text: str  # the word as it appears in FrontendResult.normalized
    lang: str  # "zh", "en", another script's tag ("ja", "ru", ...) or "other"
    pinyin: tuple[str, ...] | None  # zh: one TONE3 syllable per character (erhua 儿 = "er5"); else None
    phonemes: tuple[str, ...]  # tagged phones ("zh:sh", "zh:ang4", "en:ʃ"); empty when skipped


@dataclass(frozen=True)
class Chunk:
    """A stretch of whole words the model synthesizes in one go."""

    text: str  # the normalized text it speaks
    phonemes: tuple[str, ...]  # every token's phones, each followed by its boundary (#1..#4): ready for encode
    token_start: int  # first token, an index into FrontendResult.tokens
    token_end: int  # one past the last token


@dataclass(frozen=True)
class FrontendResult:
    """Everything the frontend made of one input text."""

    normalized: str  # the text after normalization, markup removed: what is spoken
    tokens: tuple[Token, ...]
    chunks: tuple[Chunk, ...]  # the first is short so streaming starts early; none if nothing is speakable
    warnings: tuple[str, ...]  # what was skipped and why

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`rtvox phonemize --json`)."""
        return {
            "normalized": self.normalized,
            "tokens": [
                {
                    "text": t.text,
                    "lang": t.lang,
                    "pinyin": list(t.pinyin) if t.pinyin is not None else None,
                    "phonemes": list(t.phonemes),
                }
                for t in self.tokens
            ],
            "chunks": [{"text": c.text, "phonemes": list(c.phonemes)} for c in self.chunks],
            "warnings": list(self.warnings),
        }
