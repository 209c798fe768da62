"""The phoneme vocabulary: one closed, ordered table of every symbol a model can see.

Symbols are strings. Specials come first (`<pad>` = 0, `<unk>`, `<bos>`, `<eos>`), then the prosody
boundaries, then every zh phone (initials, finals × tones 1–5, the erhua marker `zh:+r`), then every en phone
espeak-ng's en-us voice produces (with the stress marks `en:ˈ` and `en:ˌ` as phones of their own). The table
is enumerated up front, not collected from data, so a model trained with it has a fixed embedding size; a
symbol outside it encodes to `<unk>`. The JSON form is saved beside every model as vocab.json.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from rtvox.errors import ModelError
from rtvox.text.g2p_en import en_phone_inventory
from rtvox.text.pinyin import zh_phone_inventory

PAD = "<pad>"
UNK = "<unk>"
BOS = "<bos>"
EOS = "<eos>"
SPECIALS: tuple[str, ...] = (PAD, UNK, BOS, EOS)

# Prosody boundaries, weakest first. Every token is followed by one in a chunk's phonemes.
WORD = "#1"  # between words
PHRASE = "#2"  # space inside Chinese, quotes, brackets, dashes, slashes
PAUSE = "#3"  # comma-like punctuation: ，,、；;：:…
SENTENCE = "#4"  # sentence end: 。. and line breaks, and the end of the text
QUESTION = "#4?"  # sentence end with a question mark
EXCLAIM = "#4!"  # sentence end with an exclamation mark
BOUNDARIES: tuple[str, ...] = (WORD, PHRASE, PAUSE, SENTENCE, QUESTION, EXCLAIM)
BOUNDARY_LEVEL: dict[str, int] = {WORD: 1, PHRASE: 2, PAUSE: 3, SENTENCE: 4, QUESTION: 4, EXCLAIM: 4}

FORMAT_VERSION = 1


def phoneme_langs(phonemes: Iterable[str]) -> list[str]:
    """The language tag of every tagged phone ("en:ʃ" → "en"), in order; boundaries and specials have none."""
    return [p.split(":", 1)[0] for p in phonemes if ":" in p]


class Vocabulary:
    """Maps phoneme symbols to ids and back. Owns the ordered symbol table; immutable once built."""

    def __init__(self, symbols: Sequence[str]) -> None:
        symbols = tuple(symbols)
        if not symbols or symbols[0] != PAD:
            raise ModelError(f"a phoneme vocabulary must start with {PAD!r} (id 0); got {symbols[:1]!r}")
        if UNK not in symbols:
            raise ModelError(f"a phoneme vocabulary must contain {UNK!r}")
        if len(set(symbols)) != len(symbols):
            dupes = sorted(s for s, n in Counter(symbols).items() if n > 1)
            raise ModelError(f"the phoneme vocabulary lists {dupes[:5]} more than once; each symbol must be unique")
        self._symbols = symbols
        self._ids = {s: i for i, s in enumerate(symbols)}
        self.pad_id = 0
        self.unk_id = self._ids[UNK]

    @classmethod
    def default(cls) -> Vocabulary:
        """The vocabulary of this version of the frontend: every symbol it can emit."""
        return _default()

    @property
    def symbols(self) -> tuple[str, ...]:
        return self._symbols

    def __len__(self) -> int:
        return len(self._symbols)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self._symbols == other._symbols

    def __hash__(self) -> int:
        return hash(self._symbols)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} symbols)"

    def id(self, symbol: str) -> int:
        return self._ids.get(symbol, self.unk_id)

    def encode(self, phonemes: Iterable[str]) -> list[int]:
        """Ids of `phonemes`; a symbol outside the table becomes the id of `<unk>`."""
        ids = self._ids
        unk = self.unk_id
        return [ids.get(p, unk) for p in phonemes]

    def encode_for_model(
        self, phonemes: Sequence[str], skip: Collection[str] = ()
    ) -> tuple[list[int], tuple[int, ...]]:
        """(ids of the phonemes an acoustic model sees, their positions in `phonemes`): symbols in `skip`
        (a model config's skip_symbols) are left out; they take no time."""
        ids, unk = self._ids, self.unk_id
        positions = [i for i, p in enumerate(phonemes) if p not in skip] if skip else range(len(phonemes))
        return [ids.get(phonemes[i], unk) for i in positions], tuple(positions)

    def decode(self, ids: Iterable[int]) -> list[str]:
        out = []
        for i in ids:
            if not 0 <= i < len(self._symbols):
                raise ValueError(f"phoneme id {i} is outside this vocabulary of {len(self)} symbols")
            out.append(self._symbols[i])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"format": "rtvox-phonemes", "version": FORMAT_VERSION, "symbols": list(self._symbols)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Vocabulary:
        symbols = data.get("symbols") if isinstance(data, Mapping) else None
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise ModelError('a phoneme vocabulary must be a JSON object with "symbols": a list of strings')
        version = data.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ModelError(
                f"phoneme vocabulary format version {version} is not supported (expected {FORMAT_VERSION}); "
                "upgrade rtvox to load this model"
            )
        return cls(symbols)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ModelError(f"phoneme vocabulary {path} does not exist; every model directory needs one") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read phoneme vocabulary {path}: {exc}") from None
        return cls.from_dict(data)


@cache
def _default() -> Vocabulary:
    return Vocabulary((*SPECIALS, *BOUNDARIES, *zh_phone_inventory(), *en_phone_inventory()))
