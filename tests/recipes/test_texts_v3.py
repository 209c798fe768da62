"""Text mix v3, the Mandarin-first top-up: its categories and language shares, the new hand-written list and the
lexicon frames, and that v1/v2 plans are untouched by it."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from recipes.corpus.plan import CorpusPlan
from recipes.corpus.templates import HAND_WRITTEN, ZH_LEXICON_FRAMES, _zh_lexicon, _zh_words
from recipes.corpus.texts import LANGS, EvalGuard, SentenceGenerator, load_list

EMPTY = EvalGuard([])
HAN = re.compile(r"[\u4e00-\u9fff]")
ZH_PUNCT = set("，。？！、；：“”")


def test_v3_plan_is_mandarin_first_for_every_speaker_and_v2_plan_is_not() -> None:
    n = 1500
    v3 = CorpusPlan(5, None, SentenceGenerator(5, EMPTY, text_mix="v3"))
    v2 = CorpusPlan(5, None, SentenceGenerator(5, EMPTY, text_mix="v2"))
    langs3 = Counter(v3[i].lang for i in range(n))
    assert 0.75 < langs3["zh"] / n < 0.85
    en_native_zh = [v3[i] for i in range(n) if v3[i].speaker.native_lang == "en"]
    assert sum(u.lang == "zh" for u in en_native_zh) / len(en_native_zh) > 0.7  # not only the zh-native voices
    langs2 = Counter(v2[i].lang for i in range(n))
    assert langs2["zh"] / n < 0.5  # the per-speaker native/other/mixed shares still hold for v2
    # the same seed and index pick the same speaker and emotion whatever the mix: only language and text differ
    picks3 = [(v3[i].speaker.name, v3[i].emotion) for i in range(50)]
    assert picks3 == [(v2[i].speaker.name, v2[i].emotion) for i in range(50)]


def test_v3_draws_new_list_and_lexicon() -> None:
    gen = SentenceGenerator(4, EMPTY, text_mix="v3")
    n = 2000
    zh = [gen.sentence("zh", i) for i in range(n)]
    cats = Counter(s.category for s in zh)
    assert 0.40 < cats["everyday3"] / n < 0.50 and 0.20 < cats["lexicon"] / n < 0.30
    listed = set(load_list("everyday3_zh"))
    assert all(s.text in listed for s in zh if s.category == "everyday3")
    assert len({s.text for s in zh if s.category == "everyday3"}) > 600


def test_everyday3_zh_format_and_size() -> None:
    assert "everyday3_zh" in HAND_WRITTEN["zh"]
    lines = load_list("everyday3_zh")
    assert len(lines) >= 2000
    for line in lines:
        assert all(HAN.match(ch) or ch in ZH_PUNCT for ch in line), line
        assert 5 <= len(HAN.findall(line)) <= 45, line


def _frame_pattern(frame: str) -> str:
    """A regex matching `frame` with each {n1}/{v1}/{a1} slot as one captured word."""
    return re.sub(r"\\\{[nva]\d\\\}", "(.+?)", re.escape(frame))


def test_lexicon_frames_fill_every_slot_with_listed_words() -> None:
    words = _zh_words()
    assert len(words["n"]) >= 2000 and len(words["v"]) >= 1000 and len(words["a"]) >= 400
    every_word = {w for group in words.values() for w in group}
    seen_frames = set()
    for i in range(400):
        text, spoken = _zh_lexicon(random.Random(i))
        assert text == spoken and "{" not in text and "}" not in text
        assert all(HAN.match(ch) or ch in ZH_PUNCT for ch in text), text
        matches = [(f, m) for f in ZH_LEXICON_FRAMES if (m := re.fullmatch(_frame_pattern(f), text))]
        assert len(matches) == 1, text
        frame, filled = matches[0]
        seen_frames.add(frame)
        assert all(g in every_word for g in filled.groups()), text
    assert len(seen_frames) == len(ZH_LEXICON_FRAMES)


def test_v3_never_emits_eval_sentences() -> None:
    guard = EvalGuard.from_dir()
    if guard.size == 0:
        pytest.skip("no evaluation sentences found (shared/eval)")
    gen = SentenceGenerator(0, guard, text_mix="v3")
    for lang in LANGS:
        for i in range(1000):
            s = gen.sentence(lang, i)
            assert not guard.refuses(s.text) and not guard.refuses(s.spoken)
