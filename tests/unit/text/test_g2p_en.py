"""English G2P through espeak-ng: phone splitting, context rules, caching and thread safety."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from rtvox.text import Frontend
from rtvox.text.espeak import Espeak
from rtvox.text.g2p_en import espeak_word, phonemize_words, split_ipa


@pytest.mark.parametrize(
    ("word", "phones"),
    [
        ("church", "tʃ ˈ ɜː tʃ"),
        ("judge", "dʒ ˈ ʌ dʒ"),
        ("hello", "h ə l ˈ oʊ"),
        ("bottle", "b ˈ ɑː ɾ əl"),
        ("car", "k ˈ ɑːɹ"),
        ("boy", "b ˈ ɔɪ"),
        ("night", "n ˈ aɪ t"),
    ],
)
def test_espeak_words(word: str, phones: str) -> None:
    assert espeak_word(word) == tuple("en:" + p for p in phones.split())


def test_multi_clause_text_is_read_to_the_end() -> None:
    clauses = Espeak.get().phonemize("one, two; three? Four")
    assert len(clauses) >= 3
    assert len(" ".join(clauses).split()) == 4  # every word, the last clause included
    assert clauses[-1] == "f_ˈɔːɹ"


def test_split_ipa_groups_multi_letter_phones() -> None:
    assert split_ipa("tʃˈɜːtʃ") == ["tʃ", "ˈ", "ɜː", "tʃ"]
    assert split_ipa("k_ˈoʊ k ə") == ["k", "ˈ", "oʊ", "k", "ə"]
    assert split_ipa("ææ") == ["æ", "æ"]


def test_context_rules_for_articles_and_letters() -> None:
    assert phonemize_words(["a", "cat"])[0] == ("en:ɐ",)
    assert phonemize_words(["the", "apple"])[0] == ("en:ð", "en:ɪ")
    assert phonemize_words(["the", "cat"])[0] == ("en:ð", "en:ə")
    assert phonemize_words(["ten", "a", "m"])[1:] == [("en:ˈ", "en:eɪ"), ("en:ˈ", "en:ɛ", "en:m")]


def test_english_tokens_are_words(frontend: Frontend) -> None:
    tokens = frontend.tokenize("Don't panic, it's well-known.")
    assert [t.text for t in tokens] == ["Don't", "panic", "it's", "well", "known"]
    assert all(t.lang == "en" and t.pinyin is None and t.phonemes for t in tokens)


def test_threads_get_the_same_phonemes(frontend: Frontend) -> None:
    texts = [f"word number {i} is {w}" for i, w in enumerate(["apple", "orange", "grape", "melon"] * 8)]
    expected = [frontend.phonemize(t) for t in texts]
    espeak_word.cache_clear()
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(frontend.phonemize, texts)) == expected


@pytest.mark.parametrize(
    ("words", "index", "ipa"),
    [
        ("we live in Paris", 1, "lˈɪv"),
        ("the band played live music", 3, "lˈaɪv"),
        ("please record the meeting", 1, "ɹᵻkˈɔːɹd"),
        ("the record was broken", 1, "ɹˈɛkɚd"),
        ("close the door", 0, "klˈoʊz"),
        ("we are close friends", 2, "klˈoʊs"),
        ("don't tear the paper", 1, "tˈɛɹ"),
        ("a tear ran down", 1, "tˈɪɹ"),
        ("use the force", 0, "jˈuːz"),
        ("make good use of it", 2, "jˈuːs"),
    ],
)
def test_heteronyms_are_read_in_context(words: str, index: int, ipa: str) -> None:
    """A heteronym takes the reading its neighbour calls for (espeak-ng alone reads each one way only)."""
    got = phonemize_words(words.split())[index]
    assert "".join(p.removeprefix("en:") for p in got) == ipa
