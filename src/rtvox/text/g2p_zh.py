"""Chinese G2P: jieba words → pypinyin TONE3 → override tables → context rules → 一/不 sandhi → erhua.

Precedence, strongest first: inline markup (还[huan2]), the user's lexicon, our phrase table
(data/zh_overrides.tsv), the context rules, pypinyin. Each word of a run becomes one token whose `pinyin`
lists a TONE3 syllable per character. Erhua is written `er5` for the 儿 in `pinyin`; in phonemes it is the
marker `zh:+r` right after the final it rhotacizes (一点儿 → zh:ian3 zh:+r), and the 儿 has no phones of its
own. A lone 儿 word that is erhua joins the word before it (玩 + 儿 → 玩儿).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any, cast

from rtvox.text.pinyin import ERHUA, ZH_TAG, normalize_syllable, syllable_phones
from rtvox.text.zh_rules import ZhRun, apply_context_rules, apply_yi_bu_sandhi, mark_erhua, phrase_pieces


@dataclass(frozen=True)
class ZhWord:
    """One jieba word of a run with its reading; `start` is the offset of the word within the run."""

    text: str
    start: int
    pinyin: tuple[str, ...] | None  # None when some character has no known reading
    phonemes: tuple[str, ...]


@cache
def builtin_overrides() -> dict[str, tuple[str, ...]]:
    """The phrase → syllables table shipped in data/zh_overrides.tsv."""
    text = resources.files("rtvox.text").joinpath("data/zh_overrides.tsv").read_text(encoding="utf-8")
    table: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        phrase, _, reading = line.partition("\t")
        syllables = tuple(normalize_syllable(s) or "" for s in reading.split())
        assert len(syllables) == len(phrase) and all(syllables), f"zh_overrides.tsv:{number}: bad entry {line!r}"
        table[phrase] = syllables
    return table


_jieba_lock = threading.Lock()
_RUN_SEPARATOR = "\n"


@cache
def _tokenizer() -> Any:
    """A private jieba tokenizer (the global one may carry other code's words); its dictionary loads once."""
    import jieba

    logging.getLogger("jieba").setLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer


def cut(runs: Sequence[str]) -> list[list[str]]:
    """jieba words of each run of Chinese characters (dictionary only: no HMM guesses at new words).

    The runs are cut in one call, joined by line breaks that no word can cross.
    """
    tokenizer = _tokenizer()
    with _jieba_lock:
        tokens = tokenizer.cut(_RUN_SEPARATOR.join(runs), HMM=False)
        out: list[list[str]] = [[] for _ in runs]
        k = 0
        for token in tokens:
            if token == _RUN_SEPARATOR:
                k += 1
            else:
                out[k].append(token)
    assert all(sum(map(len, w)) == len(r) for w, r in zip(out, runs, strict=True)), "jieba kept every character"
    return out


def lexical_pinyin(words: list[str]) -> list[str | None]:
    """pypinyin's TONE3 reading per character of `words` (phrase-aware), None where it knows none."""
    return [syllable for word in words for syllable in word_pinyin(word)]


@lru_cache(maxsize=1 << 17)
def word_pinyin(word: str) -> tuple[str | None, ...]:
    """pypinyin's reading of one jieba word (cached: pypinyin reads each word on its own anyway)."""
    from pypinyin import Style, lazy_pinyin

    def unknown(chars: str) -> list[str]:
        return ["?"] * len(chars)

    readings = lazy_pinyin(
        list(phrase_pieces(word)), style=Style.TONE3, neutral_tone_with_five=True, errors=cast(Any, unknown)
    )
    assert len(readings) == len(word), "pypinyin returned a reading per character"
    return tuple(normalize_syllable(r) if r != "?" else None for r in readings)


class ZhG2P:
    """Reads runs of Chinese characters. Owns the merged phrase table (built-in under the user's lexicon)."""

    def __init__(self, user: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.phrases = {**builtin_overrides(), **(user or {})}
        self.max_phrase = max((len(p) for p in self.phrases), default=1)

    def read(self, text: str, fixed: Mapping[int, str] | None = None) -> list[ZhWord]:
        """Words of the run `text`; `fixed` maps character offsets to syllables from inline markup."""
        return self.read_runs([text], [fixed or {}])[0]

    def read_runs(self, texts: Sequence[str], fixed: Sequence[Mapping[int, str]]) -> list[list[ZhWord]]:
        """`read` for many runs at once (one jieba and one pypinyin call: per-call overhead dominates)."""
        word_lists = cut(texts)
        flat = [w for words in word_lists for w in words]
        readings = lexical_pinyin(flat)
        out = []
        pos = 0
        for words, pinned in zip(word_lists, fixed, strict=True):
            size = sum(map(len, words))
            run = ZhRun(words, readings[pos : pos + size])
            pos += size
            self._apply_phrases(run)
            for index, syllable in pinned.items():
                run.syllables[index] = syllable
                run.locked[index] = True
            apply_context_rules(run)
            apply_yi_bu_sandhi(run)
            mark_erhua(run)
            out.append(self._words(run))
        return out

    def _apply_phrases(self, run: ZhRun) -> None:
        """Longest table phrase starting at each word boundary wins; it may span words or end inside one."""
        chars = run.chars
        n = len(chars)
        covered_until = 0
        for start in run.word_start:
            if start < covered_until:
                continue
            for size in range(min(self.max_phrase, n - start), 0, -1):
                reading = self.phrases.get(chars[start : start + size])
                if reading is not None:
                    for k, syllable in enumerate(reading):
                        run.syllables[start + k] = syllable
                        run.locked[start + k] = True
                    covered_until = start + size
                    break

    def _words(self, run: ZhRun) -> list[ZhWord]:
        out: list[ZhWord] = []
        for w, word in enumerate(run.words):
            start = run.word_start[w]
            syllables = run.syllables[start : start + len(word)]
            if any(s is None for s in syllables):  # split off characters nobody can read
                for k, (ch, syllable) in enumerate(zip(word, syllables, strict=True)):
                    phones = syllable_phones(syllable) if syllable else ()
                    out.append(ZhWord(ch, start + k, (syllable,) if syllable else None, phones))
                continue
            phonemes: list[str] = []
            for k, syllable in enumerate(syllables):
                assert syllable is not None
                if run.erhua[start + k]:
                    phonemes.append(ZH_TAG + ERHUA)
                else:
                    phonemes.extend(syllable_phones(syllable))
            reading = tuple(s for s in syllables if s)
            prev = out[-1] if out else None
            if word == "儿" and run.erhua[start] and prev is not None and prev.pinyin is not None:
                joined = prev.pinyin + reading
                out[-1] = ZhWord(prev.text + word, prev.start, joined, prev.phonemes + tuple(phonemes))
                continue
            out.append(ZhWord(word, start, reading, tuple(phonemes)))
        return out
