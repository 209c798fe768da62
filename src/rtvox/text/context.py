"""Which language a digit, number or symbol is read in, decided from the words around it.

Digits carry no language, so "我有3个apple" reads 三 and "I have 3 apples" reads three. For a span of text the
nearest words on each side within the same clause decide: Chinese words and English words of three or more
letters are strong; shorter Latin runs (the D of 3D, the G of 5G, MP of MP3) are weak and only count when
nothing strong is near. When the two sides disagree, the side that touches the span (no space between) wins,
and Chinese wins ties. With no words in the clause, the language that dominates the whole text is used.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from rtvox.text.script import is_han, is_latin

STRONG_LATIN_LETTERS = 3
# Characters that end a clause for this purpose. "." only counts when a space follows (not 3.5 or e.g).
CLAUSE_BREAKS = frozenset("。！？!?；;，,：:\n")
MAX_RUNS_SCANNED = 8  # per side; weak runs are skipped, so a few suffice and the lookup stays O(log n)


@dataclass(frozen=True)
class _WordRun:
    start: int
    end: int
    lang: str  # "zh" or "en"
    strong: bool


@dataclass(frozen=True)
class _Neighbour:
    lang: str
    touching: bool


class LanguageContext:
    """Answers "zh or en?" for spans of one text. Owns an index of its word runs and clause breaks."""

    def __init__(self, text: str, *, skip: Sequence[tuple[int, int]] = (), default: str | None = None) -> None:
        """Index `text`; letters inside the `skip` spans (sorted, disjoint: the entities being read) are
        ignored."""
        skip_until = dict(skip)
        self._runs: list[_WordRun] = []
        self._run_starts: list[int] = []
        clause_prefix = [0] * (len(text) + 1)
        han = latin_words = 0
        i, n = 0, len(text)
        while i < n:
            if i in skip_until:
                for k in range(i, skip_until[i]):
                    clause_prefix[k + 1] = clause_prefix[k]
                i = skip_until[i]
                continue
            ch = text[i]
            is_break = ch in CLAUSE_BREAKS or (ch == "." and (i + 1 == n or text[i + 1].isspace()))
            clause_prefix[i + 1] = clause_prefix[i] + (1 if is_break else 0)
            if is_han(ch) or is_latin(ch):
                lang = "zh" if is_han(ch) else "en"
                j = i + 1
                while j < n and j not in skip_until and (is_han(text[j]) if lang == "zh" else is_latin(text[j])):
                    clause_prefix[j + 1] = clause_prefix[j]
                    j += 1
                strong = lang == "zh" or j - i >= STRONG_LATIN_LETTERS
                self._runs.append(_WordRun(i, j, lang, strong))
                self._run_starts.append(i)
                if lang == "zh":
                    han += j - i
                else:
                    latin_words += 1
                i = j
                continue
            i += 1
        self._clause_prefix = clause_prefix
        self.default = default or ("en" if latin_words > han else "zh")

    def _same_clause(self, a: int, b: int) -> bool:
        """No clause break in text[a:b]."""
        a = max(a, 0)
        b = min(b, len(self._clause_prefix) - 1)
        return a >= b or self._clause_prefix[b] == self._clause_prefix[a]

    def _neighbours(self, start: int, end: int, strong: bool) -> tuple[_Neighbour | None, _Neighbour | None]:
        k = bisect.bisect_left(self._run_starts, end)
        right = None
        for run in self._runs[k : k + MAX_RUNS_SCANNED]:
            if not self._same_clause(end, run.start):
                break
            if run.strong or not strong:
                right = _Neighbour(run.lang, run.start == end)
                break
        left = None
        j = bisect.bisect_left(self._run_starts, start) - 1
        for run in reversed(self._runs[max(0, j - MAX_RUNS_SCANNED + 1) : j + 1]):
            if run.end > start:
                continue
            if not self._same_clause(run.end, start):
                break
            if run.strong or not strong:
                left = _Neighbour(run.lang, run.end == start)
                break
        return left, right

    @property
    def has_words(self) -> bool:
        """Whether the text has any word outside the skipped spans (else nothing can give a context)."""
        return bool(self._runs)

    def lang(self, start: int, end: int) -> str:
        """Language to read text[start:end] in: "zh" or "en"."""
        for strong in (True, False):
            left, right = self._neighbours(start, end, strong)
            if left and right:
                if left.lang == right.lang:
                    return left.lang
                if left.touching != right.touching:
                    return left.lang if left.touching else right.lang
                return "zh"
            if left or right:
                return (left or right).lang  # type: ignore[union-attr]
        return self.default
