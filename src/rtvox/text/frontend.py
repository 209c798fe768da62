"""The text frontend: raw text in, normalized text, tokens and phoneme chunks out.

Stages, each a public method so tests can pin it: `normalize` (markup stripped, numbers and symbols read in
the language around them) → `segment` (single-script runs) → `tokenize` (G2P per word: zh through jieba +
pypinyin + rules, en through espeak-ng, other scripts skipped with a warning) → `phonemize` (tokens joined by
prosody boundaries) → `process` (all of it, cut into chunks).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from rtvox.constants import FIRST_CHUNK_PHONEMES, MAX_CHUNK_PHONEMES
from rtvox.errors import TextError
from rtvox.text.chunking import Spoken, build_chunks, chunk_phonemes
from rtvox.text.g2p_en import phonemize_words
from rtvox.text.g2p_zh import ZhG2P
from rtvox.text.lexicon import Lexicon
from rtvox.text.markup import parse_markup
from rtvox.text.normalize import Normalizer
from rtvox.text.result import FrontendResult, Token
from rtvox.text.script import Run, clean, is_han, split_runs
from rtvox.text.vocab import EXCLAIM, PAUSE, PHRASE, QUESTION, SENTENCE, WORD

QUESTION_MARKS = frozenset("?？")
EXCLAMATION_MARKS = frozenset("!！")
SENTENCE_ENDS = frozenset("。.\n")
PAUSE_MARKS = frozenset("，,、；;：:…—~～")
MARKUP_CONTEXT_CHARS = 40  # text beside a markup piece consulted to choose a reading language
MAX_WARNING_EXAMPLES = 5
# An English "word" longer than this (a URL path, a DNA string, a run-together identifier) is read in pieces:
# espeak-ng silently drops the end of a very long word, and one word must fit a chunk.
LONG_WORD_CHARS = 40
WORD_PIECE_CHARS = 20
_CASE_OR_DIGIT_EDGE = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])"
)


@dataclass
class _Prepared:
    normalized: str
    zh_fixed: dict[int, str] = field(default_factory=dict)  # offset in normalized → syllable from markup
    en_fixed: dict[int, tuple[str, ...]] = field(default_factory=dict)  # word start → phones from markup


class Frontend:
    """Turns text into speakable tokens and chunks. Owns the normalizer, the Chinese reader (jieba, pypinyin,
    the phrase table under the user's lexicon) and the lexicon; English words go through the process-wide
    espeak-ng handle. Safe to share between threads (jieba and espeak calls are locked).
    """

    def __init__(self, lexicon: Lexicon | None = None) -> None:
        self.lexicon = lexicon if lexicon is not None else Lexicon()
        self._normalizer = Normalizer()
        self._zh = ZhG2P(self.lexicon.zh)

    # ------------------------------------------------------------------ stages
    def normalize(self, text: str) -> str:
        """Markup removed; numbers, money, dates, units, symbols and abbreviations spelled out."""
        return self._prepare(text).normalized

    def segment(self, text: str) -> list[tuple[str, str]]:
        """(language, text) of each single-script run of the normalized text."""
        normalized = self.normalize(text)
        return [(run.lang, normalized[run.start : run.end]) for run in split_runs(normalized)]

    def tokenize(self, text: str) -> tuple[Token, ...]:
        """Tokens with pinyin and phonemes."""
        return tuple(token for token, _ in self._read(self._prepare(text))[0])

    def phonemize(self, text: str) -> tuple[str, ...]:
        """The whole text's phonemes with boundary tokens, unchunked."""
        prepared = self._prepare(text)
        return chunk_phonemes(self._spoken(prepared, self._read(prepared)[0]))

    def process(
        self,
        text: str,
        *,
        max_chunk_phonemes: int = MAX_CHUNK_PHONEMES,
        first_chunk_phonemes: int = FIRST_CHUNK_PHONEMES,
        min_first_chunk_phonemes: int = 0,
    ) -> FrontendResult:
        """Normalize, read and chunk `text`. TextError if it has nothing to speak or malformed markup.
        `min_first_chunk_phonemes`: the first chunk's floor (chunking.plan_chunks's `min_first`)."""
        if max_chunk_phonemes < 2 or first_chunk_phonemes < 2:
            raise TextError("chunk sizes must be at least 2 phonemes", param="max_chunk_phonemes")
        prepared = self._prepare(text)
        items, warnings = self._read(prepared)
        chunks = build_chunks(
            prepared.normalized,
            self._spoken(prepared, items),
            max_chunk_phonemes,
            first_chunk_phonemes,
            min_first_chunk_phonemes,
        )
        return FrontendResult(prepared.normalized, tuple(t for t, _ in items), chunks, tuple(warnings))

    # ------------------------------------------------------------------ internals
    def _prepare(self, text: str) -> _Prepared:
        if not isinstance(text, str):
            raise TextError(f"text must be a string, not {type(text).__name__}", param="input")
        pieces = parse_markup(clean(text))
        prepared = _Prepared("")
        out: list[str] = []
        length = 0
        for k, piece in enumerate(pieces):
            if piece.fixed:
                part = piece.text
            else:
                left = pieces[k - 1].text[-MARKUP_CONTEXT_CHARS:] if k else ""
                right = pieces[k + 1].text[:MARKUP_CONTEXT_CHARS] if k + 1 < len(pieces) else ""
                part = self._normalizer.normalize(piece.text, left=left, right=right)
                if part and piece.text[:1].isspace():
                    part = " " + part
                if part and piece.text[-1:].isspace():
                    part += " "
            if out and out[-1].endswith(" ") and part.startswith(" "):
                part = part[1:]
            if piece.pinyin is not None:
                han = [length + i for i, ch in enumerate(part) if is_han(ch)]
                prepared.zh_fixed.update(zip(han, piece.pinyin, strict=True))
            if piece.phonemes is not None:
                words = [r for r in split_runs(part) if r.lang == "en"]
                for run, phones in zip(words, piece.phonemes, strict=False):
                    prepared.en_fixed[length + run.start] = phones
            out.append(part)
            length += len(part)
        prepared.normalized = "".join(out).rstrip()
        if not any(run.lang for run in split_runs(prepared.normalized)):
            raise TextError(
                "the text has nothing to speak: it is empty or only spaces and punctuation; give some words",
                param="input",
            )
        return prepared

    def _read(self, prepared: _Prepared) -> tuple[list[tuple[Token, Run]], list[str]]:
        """(token, span) pairs in text order, and the warnings about what was skipped."""
        text = prepared.normalized
        runs = split_runs(text)
        items: list[tuple[Token, Run]] = []
        skipped: dict[str, list[str]] = defaultdict(list)
        zh_runs = [run for run in runs if run.lang == "zh"]
        zh_words = iter(
            self._zh.read_runs(
                [text[run.start : run.end] for run in zh_runs],
                [_pinned(prepared.zh_fixed, run) for run in zh_runs],
            )
        )
        i = 0
        while i < len(runs):
            run = runs[i]
            if run.lang == "zh":
                for word in next(zh_words):
                    span = Run("zh", run.start + word.start, run.start + word.start + len(word.text))
                    if word.pinyin is None:
                        skipped["zh"].append(word.text)
                        items.append((Token(word.text, "other", None, ()), span))
                    else:
                        items.append((Token(word.text, "zh", word.pinyin, word.phonemes), span))
                i += 1
            elif run.lang == "en":
                j = i + 1
                while j < len(runs) and runs[j].lang == "en" and _joins_words(text[runs[j - 1].end : runs[j].start]):
                    j += 1
                group = [piece for r in runs[i:j] for piece in _word_pieces(text, r, prepared.en_fixed)]
                spelled = [text[r.start : r.end] for r in group]
                read = phonemize_words(spelled, self.lexicon.en)
                for r, spelling, phones in zip(group, spelled, read, strict=True):
                    phones = prepared.en_fixed.get(r.start, phones)
                    if not phones:
                        skipped["en"].append(spelling)
                    items.append((Token(spelling, "en", None, phones), r))
                i = j
            else:
                skipped[run.lang].append(text[run.start : run.end])
                items.append((Token(text[run.start : run.end], run.lang, None, ()), run))
                i += 1
        return items, _warnings(skipped)

    @staticmethod
    def _spoken(prepared: _Prepared, items: Sequence[tuple[Token, Run]]) -> list[Spoken]:
        text = prepared.normalized
        spoken = []
        for k, (token, span) in enumerate(items):
            if k + 1 < len(items):
                nxt = items[k + 1]
                boundary = boundary_between(text[span.end : nxt[1].start], token.lang, nxt[0].lang)
            else:
                boundary = boundary_between(text[span.end :], token.lang, "")
                if boundary in (WORD, PHRASE, PAUSE):
                    boundary = SENTENCE
            spoken.append(Spoken(token.phonemes, boundary, span.start, span.end))
        return spoken


def _word_pieces(text: str, run: Run, fixed: dict[int, tuple[str, ...]]) -> list[Run]:
    """`run` itself, or for a word over LONG_WORD_CHARS its pieces: cut where the case or letters/digits change
    (camelCase, "abc123"), then any piece still over WORD_PIECE_CHARS into near-equal parts. A word whose
    phones the text pins (inline markup) stays whole."""
    word = text[run.start : run.end]
    if len(word) <= LONG_WORD_CHARS or run.start in fixed:
        return [run]
    cuts = [0, *(m.start() for m in _CASE_OR_DIGIT_EDGE.finditer(word)), len(word)]
    pieces: list[Run] = []
    for a, b in itertools.pairwise(cuts):
        parts = math.ceil((b - a) / WORD_PIECE_CHARS)
        edges = [a + round(k * (b - a) / parts) for k in range(parts + 1)]
        pieces += [Run(run.lang, run.start + x, run.start + y) for x, y in itertools.pairwise(edges) if y > x]
    return pieces


def boundary_between(gap: str, left_lang: str, right_lang: str) -> str:
    """The prosody boundary that the text between two tokens stands for."""
    if not gap:
        return WORD
    chars = set(gap)
    if chars & QUESTION_MARKS:
        return QUESTION
    if chars & EXCLAMATION_MARKS:
        return EXCLAIM
    if chars & SENTENCE_ENDS:
        return SENTENCE
    if chars & PAUSE_MARKS:
        return PAUSE
    stripped = gap.strip()
    if stripped:
        if stripped in ("-", "'") and left_lang == right_lang == "en":
            return WORD  # well-known, twenty-three
        return PHRASE
    if left_lang == right_lang == "zh":
        return PHRASE  # a space written between Chinese words is a pause
    return WORD


def _pinned(fixed: dict[int, str], run: Run) -> dict[int, str]:
    """Markup syllables inside `run`, keyed by offset within it."""
    if not fixed:
        return {}
    return {p - run.start: s for p in range(run.start, run.end) if (s := fixed.get(p))}


def _joins_words(gap: str) -> bool:
    """Words with this gap between them are read as one phrase (context for "a", "the", spelled letters)."""
    return gap.strip() in ("", "-")


def _warnings(skipped: dict[str, list[str]]) -> list[str]:
    out = []
    for lang, texts in skipped.items():
        examples = ", ".join(repr(t) for t in texts[:MAX_WARNING_EXAMPLES])
        more = f" and {len(texts) - MAX_WARNING_EXAMPLES} more" if len(texts) > MAX_WARNING_EXAMPLES else ""
        one, many = {
            "zh": ("Chinese character with no known reading", "Chinese characters with no known reading"),
            "en": ("word espeak-ng cannot read", "words espeak-ng cannot read"),
        }.get(lang, ("piece of text in a script rtvox does not read", "pieces of text in a script rtvox does not read"))
        what, verb = (one, "it is") if len(texts) == 1 else (many, "they are")
        out.append(f"skipped {len(texts)} {what}: {examples}{more}; {verb} not spoken")
    return out
