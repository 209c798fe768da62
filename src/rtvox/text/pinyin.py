"""Mandarin pinyin: syllable validation and the split of a TONE3 syllable into tagged initial and final
phones.

A syllable is written in pypinyin's TONE3 style with `v` for ü and the tone as a trailing digit 1–5 (5 =
neutral): `zhang4`, `lv4`, `er5`. Phones are tagged `zh:`; initials carry no tone (`zh:zh`), finals carry the
tone (`zh:ang4`). Finals are the standard ones, with y/w spellings undone (`you` → `iou`, `wei` → `uei`, `yu`
→ `v`) and the two apical vowels named `ir` (zhi chi shi ri) and `iz` (zi ci si), so every syllable maps to at
most one initial and exactly one final. Erhua adds the marker `zh:+r` after the final of the syllable it
modifies.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from importlib import resources

from rtvox.errors import TextError

ZH_TAG = "zh:"
TONES = ("1", "2", "3", "4", "5")
INITIALS: tuple[str, ...] = (
    "b", "p", "m", "f", "d", "t", "n", "l", "g", "k", "h",
    "j", "q", "x", "zh", "ch", "sh", "r", "z", "c", "s",
)  # fmt: skip
FINALS: tuple[str, ...] = (
    "a", "o", "e", "ê", "ai", "ei", "ao", "ou", "an", "en", "ang", "eng", "ong", "er",
    "i", "ia", "io", "ie", "iao", "iou", "ian", "in", "iang", "ing", "iong",
    "u", "ua", "uo", "uai", "uei", "uan", "uen", "uang", "ueng",
    "v", "ve", "van", "vn",
    "ir", "iz",
    "m", "n", "ng",
)  # fmt: skip
ERHUA = "+r"  # rhotacizes the final before it: 一点儿 → … zh:d zh:ian3 zh:+r

_SYLLABLE_RE = re.compile(r"^([a-zê]+)([1-5])$")
_TONE_MARKS = {  # vowel with a tone mark → (plain vowel, tone)
    **{c: ("a", t) for c, t in zip("āáǎà", "1234", strict=True)},
    **{c: ("e", t) for c, t in zip("ēéěè", "1234", strict=True)},
    **{c: ("i", t) for c, t in zip("īíǐì", "1234", strict=True)},
    **{c: ("o", t) for c, t in zip("ōóǒò", "1234", strict=True)},
    **{c: ("u", t) for c, t in zip("ūúǔù", "1234", strict=True)},
    **{c: ("v", t) for c, t in zip("ǖǘǚǜ", "1234", strict=True)},
    **{c: ("n", t) for c, t in zip("ńňǹ", "234", strict=True)},
    "ḿ": ("m", "2"),
}
_TWO_LETTER_INITIALS = ("zh", "ch", "sh")
_JQXY = ("j", "q", "x")


@cache
def valid_syllables() -> frozenset[str]:
    """Toneless syllables Mandarin uses (data/zh_syllables.txt)."""
    text = resources.files("rtvox.text").joinpath("data/zh_syllables.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def zh_phone_inventory() -> tuple[str, ...]:
    """Every zh phone, in a fixed order: initials, then finals × tones 1–5, then the erhua marker."""
    initials = [ZH_TAG + i for i in INITIALS]
    finals = [f"{ZH_TAG}{f}{t}" for f in FINALS for t in TONES]
    return (*initials, *finals, ZH_TAG + ERHUA)


def normalize_syllable(text: str) -> str | None:
    """`text` as a TONE3 syllable (`huan2`), accepting ü/u:, tone marks (`huán`) and case; None if it is not
    one."""
    s = unicodedata.normalize("NFC", text.strip().lower()).replace("u:", "v").replace("ü", "v")
    tone = ""
    plain = []
    for ch in s:
        if ch in _TONE_MARKS:
            base, mark = _TONE_MARKS[ch]
            if tone:
                return None  # two tone marks
            plain.append(base)
            tone = mark
        else:
            plain.append(ch)
    s = "".join(plain)
    if tone:
        if s and s[-1].isdigit():
            return None
        s += tone
    match = _SYLLABLE_RE.match(s)
    if match is None or match.group(1) not in valid_syllables():
        return None
    return s


def parse_syllable(text: str) -> str:
    """A valid TONE3 syllable or TextError saying how to write one."""
    syllable = normalize_syllable(text)
    if syllable is None:
        raise TextError(
            f"{text!r} is not a pinyin syllable with a tone; write it like huan2, lv4 or le5 "
            "(letters, then the tone 1–5, 5 = neutral)",
            param="input",
        )
    return syllable


def split_syllable(syllable: str) -> tuple[str, str, str]:
    """`zhang4` → (`zh`, `ang`, `4`); the initial is empty for zero-initial syllables (`you3` → ('', 'iou',
    '3'))."""
    body, tone = syllable[:-1], syllable[-1]
    if body in ("m", "n", "ng", "ê", "er"):
        return "", body, tone
    if body in ("hm", "hng"):
        return "h", body[1:], tone
    if body.startswith("y"):
        if body.startswith("yu"):
            final = "v" + body[2:]
        elif body.startswith("yi"):
            final = "i" + body[2:]
        else:
            final = "i" + body[1:]
        return "", _regular_final(final), tone
    if body.startswith("w"):
        final = "u" if body == "wu" else "u" + body[1:]
        return "", "ueng" if final == "uong" else _regular_final(final), tone
    initial = body[:2] if body[:2] in _TWO_LETTER_INITIALS else body[:1]
    if initial not in INITIALS:
        return "", _regular_final(body), tone  # a, ai, ou, e, ...
    final = body[len(initial) :]
    if initial in _JQXY and final.startswith("u"):
        final = "v" + final[1:]
    if final == "i" and initial in ("zh", "ch", "sh", "r"):
        return initial, "ir", tone
    if final == "i" and initial in ("z", "c", "s"):
        return initial, "iz", tone
    return initial, _regular_final(final), tone


def _regular_final(final: str) -> str:
    """Undo the spelling contractions iu → iou, ui → uei, un → uen (vn stays)."""
    return {"iu": "iou", "ui": "uei", "un": "uen"}.get(final, final)


def syllable_phones(syllable: str, *, erhua: bool = False) -> tuple[str, ...]:
    """Tagged phones of one syllable: (`zh:zh`, `zh:ang4`), plus `zh:+r` when erhua modifies it."""
    initial, final, tone = split_syllable(syllable)
    phones = [ZH_TAG + final + tone]
    if initial:
        phones.insert(0, ZH_TAG + initial)
    if erhua:
        phones.append(ZH_TAG + ERHUA)
    return tuple(phones)


def syllable_tone(syllable: str) -> int:
    return int(syllable[-1])


def with_tone(syllable: str, tone: int) -> str:
    return syllable[:-1] + str(tone)
