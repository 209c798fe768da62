"""Chunking: size limits, a short first chunk, whole words only, and chunk texts that cover the input."""

from __future__ import annotations

import itertools

import pytest

from rtvox.constants import FIRST_CHUNK_PHONEMES, MAX_CHUNK_PHONEMES, MIN_FIRST_CHUNK_PHONEMES
from rtvox.text import Frontend, FrontendResult
from rtvox.text.chunking import Spoken, plan_chunks

LONG_ZH = (
    "春天来了，万物复苏，田野里到处都是绿油油的麦苗。小朋友们在公园里放风筝，笑声传得很远很远。"
    "老人们坐在长椅上晒太阳，聊着家常。河边的柳树发出了新芽，微风吹过，柳枝轻轻摇摆。"
) * 6
LONG_EN = (
    "The quick brown fox jumps over the lazy dog, and then it runs into the forest to find its friends. "
    "Everyone was happy to see it again, because it had been away for a very long time. "
) * 6
LONG_MIXED = "我们下周去New York出差，顺便参加一个关于machine learning的conference，然后回来。" * 8


def _spoken(result: FrontendResult) -> list[int]:
    return [i for i, t in enumerate(result.tokens) if t.phonemes]


def _check(result: FrontendResult, max_phonemes: int, first_phonemes: int) -> None:
    chunks = result.chunks
    assert chunks, "long text gives chunks"
    # Contiguous token ranges that cover every token exactly once.
    assert chunks[0].token_start == 0 and chunks[-1].token_end == len(result.tokens)
    for a, b in itertools.pairwise(chunks):
        assert a.token_end == b.token_start
    for i, chunk in enumerate(chunks):
        spoken = [t for t in result.tokens[chunk.token_start : chunk.token_end] if t.phonemes]
        limit = first_phonemes if i == 0 else max_phonemes
        assert len(chunk.phonemes) <= limit or len(spoken) == 1
        # Never splits a word: the chunk's phonemes are exactly its tokens' phones plus one boundary each.
        assert len(chunk.phonemes) == sum(len(t.phonemes) + 1 for t in spoken)
        assert chunk.phonemes[-1].startswith("#")
        for token in spoken:
            assert token.text in chunk.text
    # The chunk texts, in order, cover every word of the normalized text.
    joined = "".join(c.text for c in chunks).replace(" ", "")
    assert joined == result.normalized.replace(" ", "")


@pytest.mark.parametrize("text", [LONG_ZH, LONG_EN, LONG_MIXED])
def test_default_limits(frontend: Frontend, text: str) -> None:
    result = frontend.process(text)
    _check(result, MAX_CHUNK_PHONEMES, FIRST_CHUNK_PHONEMES)
    assert len(result.chunks) > 2
    assert len(result.chunks[0].phonemes) <= FIRST_CHUNK_PHONEMES


@pytest.mark.parametrize(("max_phonemes", "first_phonemes"), [(30, 10), (60, 20), (120, 8)])
def test_custom_limits(frontend: Frontend, max_phonemes: int, first_phonemes: int) -> None:
    result = frontend.process(LONG_MIXED, max_chunk_phonemes=max_phonemes, first_chunk_phonemes=first_phonemes)
    _check(result, max_phonemes, first_phonemes)


def test_first_chunk_ends_at_first_punctuation_that_fits(frontend: Frontend) -> None:
    result = frontend.process("我们今天下午一起去公园散步，好吗？" * 10)
    assert result.chunks[0].text == "我们今天下午一起去公园散步，"
    assert result.chunks[0].phonemes[-1] == "#3"
    assert MIN_FIRST_CHUNK_PHONEMES <= len(result.chunks[0].phonemes) <= FIRST_CHUNK_PHONEMES


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("你好，我是小明。" + "今天天气很好，我们一起去公园散步吧。" * 10, "你好，我是小明。今天天气很好，"),
        ("Yes, " + "we should leave before the rain starts, because the road is long. " * 6, "Yes, we should leave"),
    ],
)
def test_first_chunk_is_not_a_sliver(frontend: Frontend, text: str, first: str) -> None:
    # "你好，" or "Yes," alone is under a second of audio: too little time to make a long second chunk in
    chunks = frontend.process(text, min_first_chunk_phonemes=MIN_FIRST_CHUNK_PHONEMES).chunks
    assert chunks[0].text.startswith(first)
    assert chunks[0].phonemes[-1] in ("#3", "#4")
    assert MIN_FIRST_CHUNK_PHONEMES <= len(chunks[0].phonemes) <= FIRST_CHUNK_PHONEMES


def test_first_chunk_floor_on_synthetic_tokens() -> None:
    # a #3 after every token: the first cut is the first one closing >= min_first phonemes (4 per token)
    tokens = [Spoken(("x",) * 3, "#3", i, i + 1) for i in range(30)]
    assert plan_chunks(tokens, max_phonemes=40, first_phonemes=40, min_first=10)[0] == (0, 3)
    assert plan_chunks(tokens, max_phonemes=40, first_phonemes=40, min_first=1)[0] == (0, 1)
    # no floor unless one is asked for (one-shot synthesis cuts at the first punctuation that fits)
    assert plan_chunks(tokens, max_phonemes=40, first_phonemes=40)[0] == (0, 1)


def test_first_chunk_floor_when_no_punctuation_within_the_cap_closes_it() -> None:
    # "Yes, w w w w w w w w w w, ...": the only punctuation that fits closes 4 phonemes; without a floor the first
    # chunk is that word, with one it runs to the last phrase boundary closing the floor, else the last word
    words = [Spoken(("x",) * 3, "#3", 0, 1)] + [Spoken(("x",) * 3, "#1", i, i + 1) for i in range(1, 10)]
    words += [Spoken(("x",) * 3, "#3", i, i + 1) for i in range(10, 20)]
    assert plan_chunks(words, max_phonemes=80, first_phonemes=30, min_first=0)[0] == (0, 1)
    assert plan_chunks(words, max_phonemes=80, first_phonemes=30, min_first=20)[0] == (0, 7)  # 28 phonemes fit
    phrased = [*words[:5], Spoken(("x",) * 3, "#2", 5, 6), *words[6:]]
    assert plan_chunks(phrased, max_phonemes=80, first_phonemes=30, min_first=20)[0] == (0, 6)
    # a floor that nothing within the cap closes: the old rule (the last boundary that fits)
    assert plan_chunks(words, max_phonemes=80, first_phonemes=30, min_first=29)[0] == (0, 1)


def test_later_chunks_prefer_sentence_ends(frontend: Frontend) -> None:
    result = frontend.process(LONG_ZH)
    assert all(c.phonemes[-1] == "#4" for c in result.chunks[1:])


def test_first_chunk_without_punctuation_cuts_at_a_word(frontend: Frontend) -> None:
    result = frontend.process("the quick brown fox jumps over the lazy dog " * 10)
    first = result.chunks[0]
    assert len(first.phonemes) <= FIRST_CHUNK_PHONEMES
    assert first.phonemes[-1] == "#1"
    assert len(first.phonemes) > FIRST_CHUNK_PHONEMES - 10  # as much as fits, not a sliver


def test_short_text_is_one_chunk(frontend: Frontend) -> None:
    result = frontend.process("你好，世界。")
    assert len(result.chunks) == 1 and result.chunks[0].text == "你好，世界。"


def test_word_longer_than_the_limit_is_its_own_chunk(frontend: Frontend) -> None:
    result = frontend.process(
        "a supercalifragilisticexpialidocious case", max_chunk_phonemes=12, first_chunk_phonemes=12
    )
    texts = [c.text for c in result.chunks]
    assert "supercalifragilisticexpialidocious" in texts
    assert len(result.chunks) == 3


def test_plan_chunks_on_synthetic_tokens() -> None:
    tokens = [Spoken(("x",) * 3, "#1" if i % 4 else "#3", i, i + 1) for i in range(20)]
    ranges = plan_chunks(tokens, max_phonemes=20, first_phonemes=9)
    assert ranges[0] == (0, 1)  # the first token already ends at a #3
    assert all(sum(tokens[k].cost for k in range(a, b)) <= 20 for a, b in ranges[1:])
    assert [r for rng in ranges for r in range(*rng)] == list(range(20))
