"""Characters: which script each belongs to, Unicode clean-up, and the split of text into single-script runs.

Language tags: `zh` (Han characters), `en` (Latin letters), a tag per other script we recognise (`ja` kana,
`ko` Hangul, `ru` Cyrillic, `el` Greek, `ar`, `he`, `th`, `hi`) and `other` for symbols and emoji. Digits,
punctuation and spaces belong to no run: the normalizer turns digits into words first, and punctuation becomes
prosody boundaries.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

# Fullwidth and CJK punctuation that NFKC would turn into ASCII; kept so normalized Chinese reads as written.
_KEEP_AS_IS = frozenset("，。！？；：（）【】「」『』《》〈〉、“”‘’…—～℃²³")
_NAMED_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("HIRAGANA", "ja"),
    ("KATAKANA", "ja"),
    ("HANGUL", "ko"),
    ("CYRILLIC", "ru"),
    ("GREEK", "el"),
    ("ARABIC", "ar"),
    ("HEBREW", "he"),
    ("THAI", "th"),
    ("DEVANAGARI", "hi"),
)
_WHITESPACE = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r" *\n[\s]*")
_ELLIPSIS = re.compile(r"\.{3,}|。{3,}")
_APOSTROPHE = re.compile(r"(?<=[A-Za-z])[’ʼ‘`](?=[A-Za-z])")
_DASHES = str.maketrans({"−": "-", "‐": "-", "‑": "-", "﹣": "-", "\r": "\n", "\t": " ", "\u2028": "\n"})


def is_han(ch: str) -> bool:
    """A Chinese character (CJK unified or compatibility ideograph, or 〇)."""
    o = ord(ch)
    return (
        0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x20000 <= o <= 0x323AF
        or 0xF900 <= o <= 0xFAFF
        or 0x2F800 <= o <= 0x2FA1F
        or o == 0x3007
    )


def is_latin(ch: str) -> bool:
    """A Latin-script letter (a–z, A–Z and the accented or extended ones)."""
    if ch.isascii():
        return ch.isalpha()
    return _script(ch) == "en"


def is_mark(ch: str) -> bool:
    return unicodedata.category(ch).startswith("M")


def is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def script_of(ch: str) -> str:
    """Language tag of a letter or symbol; '' for digits, punctuation, spaces and generic combining marks ('other'
    for a mark of another script)."""
    if ch.isascii():
        return "en" if ch.isalpha() else ""
    if is_han(ch):
        return "zh"
    return _script(ch)


_NEUTRAL_MARKS = ("COMBINING", "VARIATION SELECTOR")


@lru_cache(maxsize=8192)
def _script(ch: str) -> str:
    category = unicodedata.category(ch)
    if category[0] in "PZN" or category in ("Cc", "Cf", "Cs"):
        return ""
    name = unicodedata.name(ch, "")
    if category[0] == "M" and (not name or name.startswith(_NEUTRAL_MARKS)):
        return ""  # generic diacritics (COMBINING ACUTE ACCENT, variation selectors) go with any letter
    if category[0] in "LM":  # letters, and the marks of one script (DEVANAGARI SIGN VIRAMA, MALAYALAM SIGN ...)
        if name.startswith("LATIN"):
            return "en"
        for prefix, tag in _NAMED_SCRIPTS:
            if name.startswith(prefix):
                return tag
    return "other"


def clean(text: str) -> str:
    """Unicode clean-up before normalization.

    NFKC folds fullwidth letters and digits, ligatures and compatibility ideographs (Chinese punctuation and a
    few unit signs are kept); other scripts' digits become ASCII; control and format characters go; dashes,
    apostrophes, ellipses and whitespace get one spelling each. Line breaks are kept (they end sentences).
    """
    out = []
    for ch in text.translate(_DASHES):
        if ch.isascii():
            if ch >= " " or ch == "\n":
                out.append(ch)
            continue
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs"):
            continue
        if ch in _KEEP_AS_IS:
            out.append(ch)
        elif category == "Nd":
            out.append(str(unicodedata.decimal(ch)))
        elif category == "Zs":
            out.append(" ")
        else:
            folded = unicodedata.normalize("NFKC", ch)
            if "\u2044" in folded:  # a vulgar fraction (½ → 1⁄2): the normalizer reads "1/2"; "1½" is "1 1/2"
                folded = folded.replace("\u2044", "/")
                if out and out[-1].isdigit():
                    out.append(" ")
            out.append(folded)
    s = unicodedata.normalize("NFC", "".join(out))
    s = _APOSTROPHE.sub("'", s)
    s = _ELLIPSIS.sub("…", s)
    s = _WHITESPACE.sub(" ", s)
    s = _BLANK_LINES.sub("\n", s)
    return s.strip()


@dataclass(frozen=True)
class Run:
    """A maximal stretch of one script in normalized text: text[start:end]."""

    lang: str
    start: int
    end: int


def split_runs(text: str) -> list[Run]:
    """Single-script runs of `text`, in order. An English run is one word: letters, with apostrophes between
    letters; generic combining marks and marks of the run's own script stay with it; other characters separate runs.
    """
    runs: list[Run] = []
    lang = ""
    start = 0
    n = len(text)
    i = 0
    while i < n:
        ch = text[i]
        tag = script_of(ch)
        if lang and is_mark(ch) and tag in ("", lang):  # a mark of another script starts a run of its own
            i += 1
            continue
        if lang == "en" and ch == "'" and i + 1 < n and is_latin(text[i + 1]):
            i += 1
            continue
        if tag != lang:
            if lang:
                runs.append(Run(lang, start, i))
            lang, start = tag, i
        i += 1
    if lang:
        runs.append(Run(lang, start, n))
    return runs
