"""Text mix v5, the Mandarin-first top-up: its categories and language shares, the new hand-written Mandarin list
(format, size, vocabulary beyond the older lists) and its long sentences, and no evaluation or held-out check
sentence in what it draws."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from recipes.corpus.plan import CorpusPlan
from recipes.corpus.templates import HAND_WRITTEN
from recipes.corpus.texts import EvalGuard, SentenceGenerator, load_list

EMPTY = EvalGuard([])
ZH_LINE = re.compile(r"[\u4e00-\u9fff，、：；“”（）—…。？！]*[\u4e00-\u9fff）”][。？！]")  # no digits: as every list


def test_v5_plan_is_mandarin_first_for_every_speaker() -> None:
    n = 1500
    v5 = CorpusPlan(8, None, SentenceGenerator(8, EMPTY, text_mix="v5"))
    langs = Counter(v5[i].lang for i in range(n))
    assert 0.70 < langs["zh"] / n < 0.80 and langs["en"] > 0.1 * n
    en_native = [v5[i] for i in range(n) if v5[i].speaker.native_lang == "en"]
    assert sum(u.lang == "zh" for u in en_native) / len(en_native) > 0.65  # not only the zh-native voices


def test_v5_draws_the_new_list_lexicon_and_long_sentences() -> None:
    gen = SentenceGenerator(5, EMPTY, text_mix="v5")
    n = 2000
    zh = [gen.sentence("zh", i) for i in range(n)]
    cats = Counter(s.category for s in zh)
    assert 0.35 < cats["everyday4"] / n < 0.45 and 0.11 < cats["lexicon"] / n < 0.19 and cats["long4"] > 100
    listed = set(load_list("everyday4_zh"))
    assert all(s.text in listed for s in zh if s.category == "everyday4")
    assert len({s.text for s in zh if s.category == "everyday4"}) > 500
    for s in zh:
        if s.category == "long4":  # two or three list sentences joined
            assert s.text == s.spoken and len(s.text) > 20 and s.text not in listed, s.text


def test_everyday4_zh_format_size_and_vocabulary() -> None:
    assert "everyday4_zh" in HAND_WRITTEN["zh"]
    lines = load_list("everyday4_zh")
    assert len(lines) >= 2000
    assert len(set(lines)) == len(lines)  # no duplicates
    older = {ln for name in HAND_WRITTEN["zh"] if name != "everyday4_zh" for ln in load_list(name)}
    assert not older & set(lines)
    for line in lines:
        assert ZH_LINE.fullmatch(line), line
        assert 8 <= len(re.findall(r"[\u4e00-\u9fff]", line)) <= 50, line
    chars = {c for ln in lines for c in ln if "\u4e00" <= c <= "\u9fff"}
    old_chars = {c for ln in older for c in ln if "\u4e00" <= c <= "\u9fff"}
    assert len(chars) > 1500 and len(chars - old_chars) > 100  # new characters, not only new sentences


def test_v5_never_emits_eval_or_heldout_sentences() -> None:
    guard = EvalGuard.from_dir()
    if guard.size == 0:
        pytest.skip("no evaluation sentences found (shared/eval)")
    guard.check(load_list("everyday4_zh"), "recipes/corpus/data/everyday4_zh.txt")
    gen = SentenceGenerator(0, guard, text_mix="v5")
    for i in range(600):
        s = gen.sentence("zh", i)
        assert not guard.refuses(s.text) and not guard.refuses(s.spoken)
