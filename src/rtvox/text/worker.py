"""The text frontend in a worker process (the service's `frontend_processes`): one Frontend per process.

Lives under rtvox.text so a spawned worker imports the frontend and never torch.
"""

from __future__ import annotations

from rtvox.constants import FIRST_CHUNK_PHONEMES, MAX_CHUNK_PHONEMES
from rtvox.text.frontend import Frontend
from rtvox.text.lexicon import Lexicon
from rtvox.text.result import FrontendResult

_frontend: Frontend | None = None


WARMUP_TEXT = "Hello, 你好。"  # both languages: jieba's dictionary (~1 s) and espeak-ng load before any request


def init_worker(lexicon: Lexicon | None) -> None:
    """ProcessPoolExecutor initializer: this process's Frontend, with the server's lexicon, warmed up."""
    global _frontend
    _frontend = Frontend(lexicon=lexicon)
    _frontend.process(WARMUP_TEXT)


def read_text(
    text: str,
    max_chunk_phonemes: int = MAX_CHUNK_PHONEMES,
    first_chunk_phonemes: int = FIRST_CHUNK_PHONEMES,
    min_first_chunk_phonemes: int = 0,
) -> FrontendResult:
    """Frontend.process in a worker process (init_worker must have run)."""
    if _frontend is None:
        raise RuntimeError("the frontend worker was not initialized (init_worker)")
    return _frontend.process(
        text,
        max_chunk_phonemes=max_chunk_phonemes,
        first_chunk_phonemes=first_chunk_phonemes,
        min_first_chunk_phonemes=min_first_chunk_phonemes,
    )
