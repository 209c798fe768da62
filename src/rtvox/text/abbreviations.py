"""English abbreviations and dotted spellings expanded to the words that are said.

Runs after numbers are read. Titles (Mr., Dr., Prof.) expand in place; "St." is Saint before a name ("St.
John") and Street after one ("Main St."); dotted letter sequences (U.S.A., a.m.) become spaced letters that
G2P reads as letter names; a dot inside a word (example.com) reads "dot". An abbreviation that can end a
sentence keeps its period as the sentence end when a capital letter, a line break or the end of the text
follows.
"""

from __future__ import annotations

import re

# abbreviation (without its period) → (expansion, can end a sentence)
ABBREVIATIONS: dict[str, tuple[str, bool]] = {
    "Mr": ("Mister", False),
    "Mrs": ("Missus", False),
    "Ms": ("Miz", False),
    "Dr": ("Doctor", False),
    "Prof": ("Professor", False),
    "Capt": ("Captain", False),
    "Gen": ("General", False),
    "Lt": ("Lieutenant", False),
    "Sgt": ("Sergeant", False),
    "Rev": ("Reverend", False),
    "Gov": ("Governor", False),
    "Sen": ("Senator", False),
    "Rep": ("Representative", False),
    "Mt": ("Mount", False),
    "Jr": ("Junior", True),
    "Sr": ("Senior", True),
    "etc": ("et cetera", True),
    "vs": ("versus", False),
    "approx": ("approximately", False),
    "Inc": ("Incorporated", True),
    "Ltd": ("Limited", True),
    "Co": ("Company", True),
    "Corp": ("Corporation", True),
    "Dept": ("Department", True),
    "Ave": ("Avenue", True),
    "Blvd": ("Boulevard", True),
    "Rd": ("Road", True),
    "Fig": ("Figure", False),
    "fig": ("figure", False),
    "Vol": ("Volume", False),
    "vol": ("volume", False),
    "Jan": ("January", True),
    "Feb": ("February", True),
    "Mar": ("March", True),
    "Apr": ("April", True),
    "Jun": ("June", True),
    "Jul": ("July", True),
    "Aug": ("August", True),
    "Sep": ("September", True),
    "Sept": ("September", True),
    "Oct": ("October", True),
    "Nov": ("November", True),
    "Dec": ("December", True),
}
LATIN_PHRASES: dict[str, str] = {
    "e.g.": "for example",
    "i.e.": "that is",
    "E.g.": "For example",
    "I.e.": "That is",
}

_LATIN_PHRASE = re.compile(r"(?<![A-Za-z.])(?:[eE]\.g\.|[iI]\.e\.)(?:,)?")
_ABBREVIATION = re.compile(
    r"(?<![A-Za-z.])(?P<abbr>" + "|".join(sorted(ABBREVIATIONS, key=len, reverse=True)) + r")\.(?![A-Za-z])"
)
_VERSUS = re.compile(r"(?<![A-Za-z.])vs(?=\s)")
_SAINT_STREET = re.compile(r"(?<![A-Za-z.])St\.(?![A-Za-z])")
_DOTTED_LETTERS = re.compile(r"(?<![A-Za-z.])(?:[A-Za-z]\.){2,}(?![A-Za-z])")
_DOT_IN_WORD = re.compile(r"(?<=[A-Za-z0-9])\.(?=[A-Za-z])")
_SENTENCE_FOLLOWS = re.compile(r"\s*(?:$|\n)|\s+[A-Z\u4e00-\u9fff]")
_WORD_BEFORE = re.compile(r"([A-Za-z0-9]+)\s*$")
_WORD_AFTER = re.compile(r"\s*([A-Za-z]+)")


def _ends_sentence(text: str, end: int) -> bool:
    return _SENTENCE_FOLLOWS.match(text, end) is not None


def _period(text: str, end: int, can_end: bool) -> str:
    return "." if can_end and _ends_sentence(text, end) else ""


def _latin_phrase(m: re.Match[str]) -> str:
    phrase = m.group(0)
    comma = "," if phrase.endswith(",") else ""
    return LATIN_PHRASES[phrase.rstrip(",")] + comma


def _abbreviation(m: re.Match[str]) -> str:
    expansion, can_end = ABBREVIATIONS[m.group("abbr")]
    return expansion + _period(m.string, m.end(), can_end)


def _saint_or_street(m: re.Match[str]) -> str:
    text = m.string
    window_start = max(0, m.start() - 40)
    before = _WORD_BEFORE.search(text, window_start, m.start())
    after = _WORD_AFTER.match(text, m.end())
    if before and _names_street(before.group(1)) and not _starts_sentence(text, before.start()):
        return "Street" + _period(text, m.end(), True)
    if after and after.group(1)[0].isupper():
        return "Saint"
    return "Street" + _period(text, m.end(), True)


def _names_street(word: str) -> bool:
    """A street name or number comes before "St.": Main St., fifth St."""
    return word[0].isupper() or word.lower() in ("first", "second", "third") or word.endswith("th")


def _starts_sentence(text: str, index: int) -> bool:
    head = text[max(0, index - 20) : index].rstrip()
    return (index <= 20 and not head) or (bool(head) and head[-1] in ".!?。！？\n")


def _dotted_letters(m: re.Match[str]) -> str:
    letters = " ".join(m.group(0).replace(".", ""))
    return letters + _period(m.string, m.end(), True)


def expand_abbreviations(text: str) -> str:
    """Expand English abbreviations in `text` (already free of digits)."""
    if not any(ch.isascii() and ch.isalpha() for ch in text):
        return text
    text = _LATIN_PHRASE.sub(_latin_phrase, text)
    text = _SAINT_STREET.sub(_saint_or_street, text)
    text = _ABBREVIATION.sub(_abbreviation, text)
    text = _VERSUS.sub("versus", text)
    text = _DOTTED_LETTERS.sub(_dotted_letters, text)
    return _DOT_IN_WORD.sub(" dot ", text)
