"""Text mix v2: the v1 mix (the shipped model's corpus) is unchanged, v2 draws the larger hand-written lists,
and those lists keep their format rules and stay out of the evaluation sets."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from recipes.corpus.templates import HAND_WRITTEN
from recipes.corpus.texts import (
    CATEGORY_WEIGHTS,
    CATEGORY_WEIGHTS_V2,
    LANGS,
    EvalGuard,
    SentenceGenerator,
    _norm,
    load_list,
)

EMPTY = EvalGuard([])
HAN = re.compile(r"[\u4e00-\u9fff]")
ZH_PUNCT = set("，。？！、；：“”")

# (seed, lang, index, text, spoken, category) from the generator before text mixes existed (same with or without
# the shared/eval guard).
V1_GOLDEN = [
    (0, "zh", 0, "这份合同1995年5月7日到期，记得提前续签。", "这份合同一九九五年五月七日到期，记得提前续签。", "date"),
    (0, "zh", 1, "今天的会议从18:46一直开到了20:15。", "今天的会议从十八点四十六分一直开到了二十点十五分。", "time"),
    (
        0,
        "zh",
        5,
        "一行人沿着河边行走，边走边聊各行各业的事。",
        "一行人沿着河边行走，边走边聊各行各业的事。",
        "polyphone",
    ),
    (0, "zh", 123, "听说我哥哥明天上午会去医院做体检。", "听说我哥哥明天上午会去医院做体检。", "compose"),
    (0, "zh", 4567, "听说表姐星期五下午会去邮局寄一个包裹。", "听说表姐星期五下午会去邮局寄一个包裹。", "compose"),
    (
        0,
        "en",
        0,
        "The new intern might stop by the library this weekend to return some books.",
        "The new intern might stop by the library this weekend to return some books.",
        "compose",
    ),
    (
        0,
        "en",
        1,
        "The house on the corner was built in 1975.",
        "The house on the corner was built in nineteen seventy-five.",
        "number",
    ),
    (
        0,
        "en",
        5,
        "The stadium holds about 39,043 people.",
        "The stadium holds about thirty-nine thousand forty-three people.",
        "number",
    ),
    (
        0,
        "en",
        123,
        "My brother had to rush to the post office in a couple of days to mail a package.",
        "My brother had to rush to the post office in a couple of days to mail a package.",
        "compose",
    ),
    (0, "en", 4567, "The final score was 101 to 64.", "The final score was one hundred one to sixty-four.", "number"),
    (0, "mixed", 0, "你用过Slack吗？感觉怎么样？", "你用过Slack吗？感觉怎么样？", "compose"),
    (0, "mixed", 1, "下午的webinar改到了17:45。", "下午的webinar改到了十七点四十五分。", "compose"),
    (0, "mixed", 5, "这个budget的deadline是下个月初。", "这个budget的deadline是下个月初。", "compose"),
    (0, "mixed", 123, "Have you ever tried 糖葫芦 in 哈尔滨?", "Have you ever tried 糖葫芦 in 哈尔滨?", "compose"),
    (0, "mixed", 4567, "周末有个party，你要不要一起来？", "周末有个party，你要不要一起来？", "everyday"),
    (
        7,
        "zh",
        0,
        "放假以后新来的实习生得先去一趟电影院看一部新电影。",
        "放假以后新来的实习生得先去一趟电影院看一部新电影。",
        "compose",
    ),
    (7, "zh", 1, "这场篮球赛最后的比分是70比126。", "这场篮球赛最后的比分是七十比一百二十六。", "number"),
    (7, "zh", 5, "会议定在1968年4月25日上午召开。", "会议定在一九六八年四月二十五日上午召开。", "date"),
    (7, "zh", 123, "这块蛋糕太甜了，我只吃了一小口。", "这块蛋糕太甜了，我只吃了一小口。", "everyday"),
    (7, "zh", 4567, "她一进门就闻到了厨房里飘出来的香味。", "她一进门就闻到了厨房里飘出来的香味。", "everyday"),
    (
        7,
        "en",
        0,
        "The museum is free on the first Sunday of the month.",
        "The museum is free on the first Sunday of the month.",
        "everyday",
    ),
    (
        7,
        "en",
        1,
        "It was a moderate storm, and she will moderate the panel.",
        "It was a moderate storm, and she will moderate the panel.",
        "heteronym",
    ),
    (
        7,
        "en",
        5,
        "He forgot to bring his wallet, so I paid for lunch.",
        "He forgot to bring his wallet, so I paid for lunch.",
        "everyday",
    ),
    (
        7,
        "en",
        123,
        "The garden looks beautiful after the rain. Later, I'm trying to drink more water during the day.",
        "The garden looks beautiful after the rain. Later, I'm trying to drink more water during the day.",
        "long",
    ),
    (
        7,
        "en",
        4567,
        "The sky turned orange just before the storm.",
        "The sky turned orange just before the storm.",
        "everyday",
    ),
    (
        7,
        "mixed",
        0,
        "这个project的deadline是下周五，大家抓紧时间。",
        "这个project的deadline是下周五，大家抓紧时间。",
        "everyday",
    ),
    (7, "mixed", 1, "我下周三要参加一个kickoff。", "我下周三要参加一个kickoff。", "compose"),
    (
        7,
        "mixed",
        5,
        "张老师觉得这个campaign还需要再review一下。",
        "张老师觉得这个campaign还需要再review一下。",
        "compose",
    ),
    (7, "mixed", 123, "他最近在学Python，想转行做数据分析。", "他最近在学Python，想转行做数据分析。", "everyday"),
    (7, "mixed", 4567, "这个roadmap的预算是6400元。", "这个roadmap的预算是六千四百元。", "compose"),
]


def _guard() -> EvalGuard:
    guard = EvalGuard.from_dir()
    if guard.size == 0:
        pytest.skip("no evaluation sentences found (shared/eval)")
    return guard


def test_v1_is_the_default_and_unchanged() -> None:
    guard = EvalGuard.from_dir()
    for seed in sorted({g[0] for g in V1_GOLDEN}):
        default, v1 = SentenceGenerator(seed, guard), SentenceGenerator(seed, guard, text_mix="v1")
        for g_seed, lang, index, text, spoken, category in V1_GOLDEN:
            if g_seed != seed:
                continue
            for gen in (default, v1):
                s = gen.sentence(lang, index)
                assert (s.text, s.spoken, s.category) == (text, spoken, category), (seed, lang, index)


def test_v1_never_draws_new_categories_and_v1_v2_agree_on_en() -> None:
    v1, v2 = SentenceGenerator(11, EMPTY), SentenceGenerator(11, EMPTY, text_mix="v2")
    for lang in LANGS:
        cats = {v1.sentence(lang, i).category for i in range(800)}
        assert not cats & {"everyday2", "mixed2"}, lang
    assert [v1.sentence("en", i) for i in range(200)] == [v2.sentence("en", i) for i in range(200)]


def test_v2_draws_the_new_lists() -> None:
    gen = SentenceGenerator(3, EMPTY, text_mix="v2")
    n = 2000
    zh = [gen.sentence("zh", i) for i in range(n)]
    mixed = [gen.sentence("mixed", i) for i in range(n)]
    zh_cats, mixed_cats = Counter(s.category for s in zh), Counter(s.category for s in mixed)
    assert 0.40 < zh_cats["everyday2"] / n < 0.50
    assert 0.45 < mixed_cats["mixed2"] / n < 0.55
    assert {"everyday", "polyphone", "number", "date", "time", "currency", "long", "compose"} <= set(zh_cats)
    assert {"everyday", "compose"} <= set(mixed_cats)
    new_zh, new_mixed = set(load_list("everyday2_zh")), set(load_list("mixed2"))
    assert all(s.text in new_zh for s in zh if s.category == "everyday2")
    assert all(s.text in new_mixed for s in mixed if s.category == "mixed2")
    assert len({s.text for s in zh if s.category == "everyday2"}) > 500  # spread over the list


def test_v2_weights_sum_to_one_and_bad_mix_refused() -> None:
    for table in (CATEGORY_WEIGHTS, CATEGORY_WEIGHTS_V2):
        for lang in LANGS:
            assert sum(table[lang].values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="text_mix"):
        SentenceGenerator(0, EMPTY, text_mix="v9")


def test_new_lists_registered_and_sized() -> None:
    assert "everyday2_zh" in HAND_WRITTEN["zh"] and "mixed2" in HAND_WRITTEN["mixed"]
    assert len(load_list("everyday2_zh")) >= 900
    assert len(load_list("mixed2")) >= 150


def test_everyday2_zh_format() -> None:
    for line in load_list("everyday2_zh"):
        assert not re.search(r"[A-Za-z0-9]", line), line
        assert all(HAN.match(ch) or ch in ZH_PUNCT for ch in line), line
        assert 8 <= len(HAN.findall(line)) <= 40, line


def test_mixed2_format() -> None:
    for line in load_list("mixed2"):
        assert re.search(r"[A-Za-z]", line) and HAN.search(line), line
        assert not re.search(r"[0-9]", line), line


@pytest.mark.parametrize("name", ["everyday2_zh", "mixed2"])
def test_new_lists_unique_and_not_in_older_lists(name: str) -> None:
    lines = load_list(name)
    normed = [_norm(ln) for ln in lines]
    assert len(set(normed)) == len(normed), [ln for ln, c in Counter(normed).items() if c > 1][:5]
    older = {_norm(s) for lang in HAND_WRITTEN.values() for n in lang if n != name for s in load_list(n)}
    assert not set(normed) & older


def test_new_lists_pass_the_eval_guard() -> None:
    guard = _guard()
    for name in ("everyday2_zh", "mixed2"):
        assert [ln for ln in load_list(name) if guard.refuses(ln)] == [], name


def test_v2_never_emits_eval_sentences() -> None:
    guard = _guard()
    gen = SentenceGenerator(0, guard, text_mix="v2")
    for lang in LANGS:
        for i in range(1500):
            s = gen.sentence(lang, i)
            assert not guard.refuses(s.text) and not guard.refuses(s.spoken)


def test_build_cli_refuses_other_mix_on_resume(tmp_path: Path) -> None:
    pytest.importorskip("pyworld")  # recipes.corpus.build imports the teacher stack
    from recipes.corpus.build import main as build_main

    (tmp_path / "build_info.json").write_text('{"runs": []}', encoding="utf-8")  # built before mixes: v1
    assert build_main(["--out", str(tmp_path), "--text-mix", "v2", "--eval-dir", str(tmp_path / "none")]) == 2
    with pytest.raises(SystemExit):
        build_main(["--out", str(tmp_path), "--text-mix", "v9"])
