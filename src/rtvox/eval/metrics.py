"""Intelligibility scoring: the text normalization shared by reference and hypothesis, and edit-distance error
rates (WER over words, CER over Han characters, and the mixed rate over both).

Reference and ASR hypothesis go through the same steps, so a difference in writing is not counted as an error:
Traditional → Simplified Chinese (Whisper often answers in Traditional), rtvox's own text normalizer (digits,
dates, money, times become words in the language around them, as the synthesizer reads them), lower case, and
punctuation removed. Tokens are then Han characters one by one and Latin words (with digits left over, if any).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from rtvox.text.normalize import Normalizer
from rtvox.text.script import is_han

LANGS = ("en", "zh", "mixed")
# Equivalent spellings that differ only in writing convention, mapped to one form on both sides.
SPELLING = {"ok": "okay", "o.k.": "okay", "e-mail": "email", "〇": "零"}
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
_SPLITTERS = re.compile(r"[-‐‑–—_/]")
# Whisper writes a Chinese clock time as "15.40分"; the text normalizer would read that as a decimal.
_ZH_DOTTED_TIME = re.compile(r"(?<![\d.])([01]?\d|2[0-3])[.:]([0-5]\d)分")
# ...and an English one as "at 6.30" (British style); after a time preposition that is a clock time, not a decimal.
_EN_DOTTED_TIME = re.compile(
    r"\b(at|by|until|till|from|before|after|around|to|past)\s+([01]?\d|2[0-3])\.([0-5]\d)(?![\d.]\d)", re.IGNORECASE
)


@lru_cache(maxsize=1)
def _normalizer() -> Normalizer:
    return Normalizer()


def to_simplified(text: str) -> str:
    """Traditional Chinese characters to Simplified (zhconv when installed; text unchanged otherwise)."""
    try:
        import zhconv
    except ImportError:
        return text
    return str(zhconv.convert(text, "zh-cn"))


def normalize_for_scoring(text: str) -> str:
    """Canonical spoken form of `text`: simplified, verbalized, lower case, no punctuation, single spaces.

    Han characters are separated by spaces so the result splits into scoring tokens.
    """
    text = unicodedata.normalize("NFKC", to_simplified(text)).translate(_APOSTROPHES)
    text = _ZH_DOTTED_TIME.sub(r"\1:\2", text)
    text = _EN_DOTTED_TIME.sub(r"\1 \2:\3", text)
    text = _normalizer().normalize(text)
    text = text.lower()
    for written, canonical in SPELLING.items():
        text = re.sub(rf"(?<![a-z0-9']){re.escape(written)}(?![a-z0-9'])", canonical, text)
    text = _SPLITTERS.sub(" ", text)
    out: list[str] = []
    for ch in text:
        if is_han(ch):
            out.append(f" {ch} ")
        elif (ch.isascii() and (ch.isalnum() or ch == "'")) or ch.isalpha():
            out.append(ch)
        else:
            out.append(" ")
    return " ".join("".join(out).split())


def tokens(text: str) -> list[str]:
    """Scoring tokens of already normalized text: Han characters and words (stray apostrophes dropped)."""
    result = []
    for token in text.split():
        token = token.strip("'")
        if token:
            result.append(token)
    return result


def han_tokens(items: list[str]) -> list[str]:
    return [t for t in items if len(t) == 1 and is_han(t)]


def word_tokens(items: list[str]) -> list[str]:
    return [t for t in items if not (len(t) == 1 and is_han(t))]


@dataclass(frozen=True)
class ErrorCounts:
    """Edit operations turning a reference token sequence into a hypothesis; rates pool by summing counts."""

    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    reference_length: int = 0  # number of reference tokens (the rate's denominator)

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def rate(self) -> float:
        """errors / reference tokens; an empty reference scores 0 if the hypothesis is empty too, else 1."""
        if self.reference_length == 0:
            return 0.0 if self.errors == 0 else 1.0
        return self.errors / self.reference_length

    def __add__(self, other: ErrorCounts) -> ErrorCounts:
        return ErrorCounts(
            self.substitutions + other.substitutions,
            self.deletions + other.deletions,
            self.insertions + other.insertions,
            self.reference_length + other.reference_length,
        )


def edit_counts(reference: list[str], hypothesis: list[str]) -> ErrorCounts:
    """Minimum-edit alignment (unit costs); ties prefer substitution, then deletion, then insertion."""
    n, m = len(reference), len(hypothesis)
    # cost[j], ops[j] = (sub, del, ins) of the best path to reference[:i], hypothesis[:j]; rolled over i
    prev = [(j, (0, 0, j)) for j in range(m + 1)]
    for i in range(1, n + 1):
        row = [(i, (0, i, 0))]
        for j in range(1, m + 1):
            same = reference[i - 1] == hypothesis[j - 1]
            c_diag, o_diag = prev[j - 1]
            c_up, o_up = prev[j]
            c_left, o_left = row[j - 1]
            candidates = (
                (c_diag + (0 if same else 1), (o_diag[0] + (0 if same else 1), o_diag[1], o_diag[2])),
                (c_up + 1, (o_up[0], o_up[1] + 1, o_up[2])),
                (c_left + 1, (o_left[0], o_left[1], o_left[2] + 1)),
            )
            row.append(min(candidates, key=lambda c: c[0]))
        prev = row
    s, d, ins = prev[m][1]
    return ErrorCounts(substitutions=s, deletions=d, insertions=ins, reference_length=n)


def score(reference: str, hypothesis: str, lang: str) -> dict[str, ErrorCounts]:
    """Error counts of one sentence by metric name.

    en → `wer` (words); zh → `cer` (Han characters, plus any Latin word as one token); mixed → `cer` (Han
    characters only), `wer` (Latin words only) and `mer`, the mixed error rate over Han characters and Latin
    words together.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
    ref, hyp = tokens(normalize_for_scoring(reference)), tokens(normalize_for_scoring(hypothesis))
    if lang == "en":
        return {"wer": edit_counts(ref, hyp)}
    if lang == "zh":
        return {"cer": edit_counts(ref, hyp)}
    return {
        "cer": edit_counts(han_tokens(ref), han_tokens(hyp)),
        "wer": edit_counts(word_tokens(ref), word_tokens(hyp)),
        "mer": edit_counts(ref, hyp),
    }


def primary_metric(lang: str) -> str:
    """The headline metric of a set: WER for English, CER for Chinese, the mixed rate for mixed sentences."""
    return {"en": "wer", "zh": "cer", "mixed": "mer"}[lang]
