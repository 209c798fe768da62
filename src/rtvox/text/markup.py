"""Inline pronunciation control inside the input text.

* `还[huan2]钱`: pinyin in square brackets right after Chinese characters sets their reading; with N syllables
  (`银行[yin2 hang2]`) it covers the N characters before the bracket. Tone marks are accepted (`还[huán]`).
* `{word|phonemes}`: any word with its pronunciation — IPA for English (`{kokoro|kˈoʊkəɹoʊ}`, one
  space-separated group per word for several words), pinyin for Chinese (`{重庆|chong2 qing4}`).

Brackets after anything but Chinese characters, or holding other text (`[注]`, `[1]`), are left alone. A
bracket that looks like pinyin but is not valid, or is not closed, is a TextError that names the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rtvox.errors import TextError
from rtvox.text.g2p_en import parse_ipa
from rtvox.text.pinyin import normalize_syllable
from rtvox.text.script import is_han, is_latin

_PINYIN_CHARS = r"A-Za-z0-9 :üÜāáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜńňǹḿ"
_ZH_BRACKET = re.compile(rf"\[([{_PINYIN_CHARS}]*)(\]?)")
_BRACED = re.compile(r"\{([^{}|\n]*)\|([^{}\n]*)\}")
_UNCLOSED_BRACE = re.compile(r"\{[^{}|\n]{1,40}\|[^{}\n]*(?:\n|$)")  # "{word|ipa" with no "}"


@dataclass(frozen=True)
class Piece:
    """A stretch of input: plain text to normalize, or text whose pronunciation the markup fixed."""

    text: str
    pinyin: tuple[str, ...] | None = None  # one syllable per Chinese character of text
    phonemes: tuple[tuple[str, ...], ...] | None = None  # tagged phones per English word of text

    @property
    def fixed(self) -> bool:
        return self.pinyin is not None or self.phonemes is not None


def parse_markup(text: str) -> list[Piece]:
    """Split `text` into plain and pronunciation-fixed pieces (markup removed)."""
    if "[" not in text and "{" not in text:
        return [Piece(text)]
    pieces: list[Piece] = []
    pos = 0
    for m in _BRACED.finditer(text):
        pieces.extend(_zh_brackets(text[pos : m.start()]))
        pieces.append(_braced(m.group(1).strip(), m.group(2).strip()))
        pos = m.end()
    pieces.extend(_zh_brackets(text[pos:]))
    for piece in pieces:
        if not piece.fixed and _UNCLOSED_BRACE.search(piece.text):
            raise TextError("a '{word|pronunciation}' is not closed; end it with '}' or remove the '{'", param="input")
    return [p for p in pieces if p.text]


def _braced(word: str, pronunciation: str) -> Piece:
    if not word or not pronunciation:
        raise TextError(
            f"'{{{word}|{pronunciation}}}' needs a word and its pronunciation, like {{kokoro|kˈoʊkəɹoʊ}}",
            param="input",
        )
    han = [c for c in word if is_han(c)]
    if han and all(is_han(c) or c.isspace() for c in word):
        return Piece(word, pinyin=_syllables(pronunciation, "".join(han)))
    words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)*", word)
    if words and all(all(is_latin(c) or c == "'" for c in w) for w in words):
        groups = pronunciation.split()
        if len(groups) != len(words):
            groups = [pronunciation] + [""] * (len(words) - 1)
        phonemes = tuple(parse_ipa(g, word=w) if g else () for w, g in zip(words, groups, strict=True))
        return Piece(word, phonemes=phonemes)
    raise TextError(
        f"'{{{word}|...}}' must wrap Chinese characters (with pinyin) or English words (with IPA)",
        param="input",
    )


def _syllables(pronunciation: str, chars: str) -> tuple[str, ...]:
    syllables = []
    for raw in pronunciation.split():
        syllable = normalize_syllable(raw)
        if syllable is None:
            raise TextError(
                f"inline pinyin {raw!r} for {chars!r} is not a syllable with a tone; write e.g. 还[huan2] "
                "(letters then tone 1–5, 5 = neutral)",
                param="input",
            )
        syllables.append(syllable)
    if len(syllables) != len(chars):
        raise TextError(
            f"inline pinyin {pronunciation!r} has {len(syllables)} syllables for {len(chars)} characters "
            f"{chars!r}; give one syllable per character",
            param="input",
        )
    return tuple(syllables)


def _zh_brackets(text: str) -> list[Piece]:
    """Plain text with `字[pin1]` markup split out."""
    pieces: list[Piece] = []
    pos = 0
    for m in _ZH_BRACKET.finditer(text):
        start = m.start()
        if start == 0 or not is_han(text[start - 1]):
            continue
        content, closed = m.group(1), m.group(2)
        if not closed:
            if content.strip() and any(c.isdigit() for c in content):
                raise TextError(
                    f"inline pinyin '[{content}' after {text[start - 1]!r} lacks ']'; write e.g. 还[huan2]",
                    param="input",
                )
            continue
        if not content.strip() or content.strip().isdigit():
            continue  # [] and citation marks like 文献[1] stay text
        count = len(content.split())
        han_start = start
        while han_start > pos and start - han_start < count and is_han(text[han_start - 1]):
            han_start -= 1
        chars = text[han_start:start]
        if len(chars) < count:
            raise TextError(
                f"inline pinyin [{content}] has {count} syllables but only {len(chars)} Chinese characters "
                f"{chars!r} stand right before it",
                param="input",
            )
        pieces.append(Piece(text[pos:han_start]))
        pieces.append(Piece(chars, pinyin=_syllables(content, chars)))
        pos = m.end()
    pieces.append(Piece(text[pos:]))
    return pieces
