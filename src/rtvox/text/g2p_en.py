"""English G2P: one word at a time through espeak-ng's en-us voice, with a user lexicon on top.

Phones are tagged `en:` and are the units espeak-ng's en-us phoneme table uses (`en:tʃ`, `en:aɪ`, `en:ɑːɹ`,
`en:əl`); stress marks are phones of their own placed before the stressed vowel (`en:ˈ`, `en:oʊ`). A word's
phones are cached (the cache key is the exact spelling). Context rules fix what isolated lookup gets wrong:
the article "a" is the weak /ɐ/ (espeak reads a lone "a" as the letter), "the" before a vowel is /ðɪ/; a run of
two or more one-letter words (`a m`, `U S A`) is read as letter names; and a heteronym (live, record, close, …)
is read after its previous word, or after "to" where that word or its place makes it a verb.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rtvox.errors import TextError
from rtvox.text.espeak import PHONE_SEPARATOR, Espeak

EN_TAG = "en:"
STRESS_MARKS: tuple[str, ...] = ("ˈ", "ˌ")
# Every phone espeak-ng's en-us voice emits (collected by phonemizing letter strings, loanwords and prose and
# checked against its phoneme table), plus a few vowels of its other English voices so lexicon entries may use
# them. Order is part of the vocabulary format: append only.
EN_CONSONANTS: tuple[str, ...] = (
    "p", "b", "t", "d", "k", "ɡ", "f", "v", "θ", "ð", "s", "z", "ʃ", "ʒ", "h", "x", "ç",
    "tʃ", "dʒ", "m", "n", "ŋ", "n̩", "l", "ɬ", "ɹ", "r", "j", "w", "ʔ", "ɾ",
)  # fmt: skip
EN_VOWELS: tuple[str, ...] = (
    "i", "iː", "ɪ", "ᵻ", "e", "ɛ", "æ", "a", "ɐ", "ɑ", "ɑː", "ɒ", "ɔ", "ɔː", "o", "oː", "u", "uː", "ʊ", "ʌ",
    "ə", "ɚ", "ɜ", "ɜː", "əl", "eɪ", "aɪ", "ɔɪ", "aʊ", "oʊ", "əʊ", "ɪɹ", "ɛɹ", "ʊɹ", "ɑːɹ", "ɔːɹ", "oːɹ",
    "aɪɚ", "aɪə", "iə", "ʊə", "eə", "ɑ̃", "ɔ̃", "ɛ̃",
)  # fmt: skip
EN_PHONES: tuple[str, ...] = (*STRESS_MARKS, *EN_CONSONANTS, *EN_VOWELS)
_KNOWN = frozenset(EN_PHONES)
_VOWELS = frozenset(EN_VOWELS)
_LONGEST = max(len(p) for p in EN_PHONES)
_LENGTH_MARK = "ː"
ARTICLE_A: tuple[str, ...] = (EN_TAG + "ɐ",)
THE_BEFORE_VOWEL: tuple[str, ...] = (EN_TAG + "ð", EN_TAG + "ɪ")


def en_phone_inventory() -> tuple[str, ...]:
    return tuple(EN_TAG + p for p in EN_PHONES)


def split_ipa(ipa: str) -> list[str]:
    """Untagged phones of an IPA string: greedy longest match against the inventory, stress marks apart.

    Separators (spaces, `_`, `.`, `-`) are optional. A character that matches nothing is kept as a phone of
    its own (the vocabulary maps it to `<unk>`), except a stray length mark, which is dropped.
    """
    phones: list[str] = []
    for piece in ipa.replace(PHONE_SEPARATOR, " ").replace(".", " ").replace("-", " ").split():
        i = 0
        while i < len(piece):
            for size in range(min(_LONGEST, len(piece) - i), 0, -1):
                if piece[i : i + size] in _KNOWN:
                    phones.append(piece[i : i + size])
                    i += size
                    break
            else:
                if piece[i] != _LENGTH_MARK:
                    phones.append(piece[i])
                i += 1
    return phones


def parse_ipa(ipa: str, *, word: str) -> tuple[str, ...]:
    """Tagged phones of a user-written IPA string, or TextError naming the first unknown symbol."""
    phones = split_ipa(ipa)
    unknown = [p for p in phones if p not in _KNOWN]
    if unknown:
        raise TextError(
            f"pronunciation {ipa!r} for {word!r} uses {unknown[0]!r}, not an en-us phone; use IPA as "
            f"espeak-ng writes it, e.g. {' '.join(EN_PHONES[2:12])} aɪ oʊ ɑːɹ, with ˈ ˌ for stress",
            param="input",
        )
    if not phones:
        raise TextError(f"pronunciation for {word!r} is empty; give IPA phones like kˈoʊkəɹoʊ", param="input")
    return tuple(EN_TAG + p for p in phones)


@lru_cache(maxsize=65_536)
def espeak_word(word: str) -> tuple[str, ...]:
    """Tagged phones espeak-ng en-us gives `word` read on its own."""
    clauses = Espeak.get().phonemize(word, "en-us")
    return tuple(EN_TAG + p for p in split_ipa(" ".join(clauses)))


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words espeak-ng reads one way alone and another in context (noun/adjective vs verb, present vs past): read with
# their neighbour (`in_context`). Inflected forms included where they are heteronyms too.
HETERONYMS = _word_set(
    """live lives read record records close closes object objects tear tears lead leads wind winds wound use uses
    present presents desert deserts produce increase increases decrease decreases permit permits contract contracts
    conduct content project projects subject subjects progress refuse import imports export exports transport
    address contest conflict convert convict digest extract insert insult perfect protest protests rebel reject
    survey suspect suspects torment upset excuse excuses house houses separate estimate graduate moderate alternate
    associate advocate duplicate appropriate deliberate approximate elaborate bow bows row rows sow"""
)
# A previous word after which a heteronym is the verb: espeak reads the word after "to" as a verb
VERB_CUES = _word_set(
    """to please will would can could should must may might shall don't doesn't didn't won't can't cannot let's
    and then always never just"""
)
# A next word that makes a run-initial heteronym an imperative verb (Close the door, Record the meeting)
OBJECT_STARTS = _word_set("the a an this that these those my your his her our their its it them me him us all")


def heteronym_context(words: Sequence[str], i: int) -> str | None:
    """The word to read words[i] after (espeak's own context rules pick the reading), or None: read alone."""
    if words[i].lower() not in HETERONYMS:
        return None
    prev = words[i - 1].lower() if i > 0 else ""
    nxt = words[i + 1].lower() if i + 1 < len(words) else ""
    if prev in VERB_CUES or (not prev and nxt in OBJECT_STARTS):
        return "to"
    return words[i - 1] if prev.isalpha() else None


@lru_cache(maxsize=16_384)
def in_context(before: str, word: str) -> tuple[str, ...]:
    """Tagged phones espeak-ng en-us gives `word` when it follows `before` (the last word of its output)."""
    clauses = Espeak.get().phonemize(f"{before} {word}", "en-us")
    groups = " ".join(clauses).split()
    return tuple(EN_TAG + p for p in split_ipa(groups[-1])) if groups else espeak_word(word)


def letter_name(letter: str) -> tuple[str, ...]:
    return espeak_word(letter.upper())


def starts_with_vowel(phones: Sequence[str]) -> bool:
    for phone in phones:
        bare = phone.removeprefix(EN_TAG)
        if bare in STRESS_MARKS:
            continue
        return bare in _VOWELS
    return False


def phonemize_words(words: Sequence[str], lexicon: dict[str, tuple[str, ...]] | None = None) -> list[tuple[str, ...]]:
    """Tagged phones of each word of one English run, in order (context rules need the neighbours)."""
    lexicon = lexicon or {}
    spelled = _spelled_positions(words)
    out: list[tuple[str, ...]] = []
    for i, word in enumerate(words):
        entry = lexicon.get(word.lower())
        if entry is not None:
            out.append(entry)
        elif i in spelled:
            out.append(letter_name(word))
        elif word in ("a", "A"):
            out.append(ARTICLE_A)
        elif (before := heteronym_context(words, i)) is not None:
            out.append(in_context(before, word))
        else:
            out.append(espeak_word(word))
    for i, word in enumerate(words[:-1]):
        if word.lower() == "the" and word.lower() not in lexicon and starts_with_vowel(out[i + 1]):
            out[i] = THE_BEFORE_VOWEL
    return out


def _spelled_positions(words: Sequence[str]) -> set[int]:
    """Indices of one-letter words in a run of two or more of them: those are read as letter names."""
    spelled: set[int] = set()
    run: list[int] = []
    for i, word in enumerate((*words, "")):
        if len(word) == 1 and word.isalpha():
            run.append(i)
            continue
        if len(run) >= 2:
            spelled.update(run)
        run = []
    return spelled
