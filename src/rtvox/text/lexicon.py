"""User lexicon: words whose pronunciation the user fixes, zh words to pinyin and en words to IPA phonemes.

File format (UTF-8), either of:

* TSV: one entry per line, `word<TAB>pronunciation`; blank lines and lines starting with `#` are ignored.
* JSON: one object `{"word": "pronunciation", ...}`.

The word's script picks the language. A word of Chinese characters takes TONE3 pinyin, one syllable per
character, separated by spaces (`重庆<TAB>chong2 qing4`; tone marks `chóng qìng` are accepted too). A Latin
word takes IPA as espeak-ng writes it, spaces optional (`kokoro<TAB>kˈoʊkəɹoʊ`); English entries match
case-insensitively. The format is told apart by content (a JSON file starts with `{`), not by the file name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from rtvox.errors import TextError
from rtvox.text.g2p_en import parse_ipa
from rtvox.text.pinyin import parse_syllable
from rtvox.text.script import is_han, is_latin


class Lexicon:
    """Word → pronunciation overrides for both languages. Owns two dicts; read-only after construction."""

    def __init__(
        self,
        zh: Mapping[str, tuple[str, ...]] | None = None,
        en: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.zh: dict[str, tuple[str, ...]] = dict(zh or {})  # word → TONE3 syllables, one per character
        self.en: dict[str, tuple[str, ...]] = {k.lower(): v for k, v in (en or {}).items()}  # → tagged phones
        self.max_zh_len = max((len(w) for w in self.zh), default=0)

    def __len__(self) -> int:
        return len(self.zh) + len(self.en)

    def __iter__(self) -> Iterator[str]:
        yield from self.zh
        yield from self.en

    def __repr__(self) -> str:
        return f"Lexicon({len(self.zh)} zh, {len(self.en)} en entries)"

    @classmethod
    def from_dict(cls, entries: Mapping[str, str]) -> Lexicon:
        """Build from `{word: pronunciation}`, validating every entry (TextError names the bad one)."""
        zh: dict[str, tuple[str, ...]] = {}
        en: dict[str, tuple[str, ...]] = {}
        for raw_word, pronunciation in entries.items():
            word = raw_word.strip()
            if not isinstance(pronunciation, str):
                raise TextError(f"lexicon entry {word!r} must map to a string, not {type(pronunciation).__name__}")
            if word and all(is_han(c) for c in word):
                syllables = tuple(parse_syllable(s) for s in pronunciation.split())
                if len(syllables) != len(word):
                    raise TextError(
                        f"lexicon entry {word!r} has {len(word)} characters but {len(syllables)} syllables "
                        f"({pronunciation!r}); give one pinyin syllable per character",
                        param="lexicon",
                    )
                zh[word] = syllables
            elif word and all(is_latin(c) or c in "'-" for c in word) and any(is_latin(c) for c in word):
                en[word] = parse_ipa(pronunciation, word=word)
            else:
                raise TextError(
                    f"lexicon word {word!r} must be Chinese characters (with pinyin) or a Latin-letter word "
                    "(with IPA phonemes)",
                    param="lexicon",
                )
        return cls(zh, en)

    @classmethod
    def load(cls, path: str | Path) -> Lexicon:
        """Read a TSV or JSON lexicon file (see the module docstring)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise TextError(f"lexicon file {path} does not exist", param="lexicon") from None
        except UnicodeDecodeError:
            raise TextError(f"lexicon file {path} is not UTF-8 text", param="lexicon") from None
        except OSError as exc:
            raise TextError(f"cannot read lexicon file {path}: {exc.strerror}", param="lexicon") from None
        text = text.lstrip("\ufeff")
        if text.lstrip().startswith("{"):
            return cls.from_dict(_parse_json(text, path))
        return cls.from_dict(_parse_tsv(text, path))

    def lookup_en(self, word: str) -> tuple[str, ...] | None:
        return self.en.get(word.lower())


def _parse_json(text: str, path: Path) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TextError(f"lexicon file {path} is not valid JSON ({exc}); fix it or use TSV", param="lexicon") from None
    if not isinstance(data, dict):
        raise TextError(f'lexicon file {path} must hold one JSON object {{"word": "pronunciation"}}', param="lexicon")
    return data


def _parse_tsv(text: str, path: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        word, sep, pronunciation = line.partition("\t")
        if not sep or not word.strip() or not pronunciation.strip():
            raise TextError(
                f"{path}:{number}: expected 'word<TAB>pronunciation', got {line.strip()!r}", param="lexicon"
            )
        entries[word.strip()] = pronunciation.strip()
    return entries
