"""Sentence generation: deterministic by seed, verbalization correct, evaluation sentences never emitted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from recipes.corpus import verbalize as vb
from recipes.corpus.texts import HAND_WRITTEN, LANG_SHARES, LANGS, TEXT_MIXES, EvalGuard, SentenceGenerator, load_list

EMPTY = EvalGuard([])


def test_same_seed_same_sentences() -> None:
    a, b = SentenceGenerator(7, EMPTY), SentenceGenerator(7, EMPTY)
    for lang in LANGS:
        assert [a.sentence(lang, i) for i in range(200)] == [b.sentence(lang, i) for i in range(200)]


def test_order_independent_and_seed_sensitive() -> None:
    gen = SentenceGenerator(7, EMPTY)
    forward = [gen.sentence("zh", i) for i in range(50)]
    backward = [gen.sentence("zh", i) for i in reversed(range(50))][::-1]
    assert forward == backward
    other = [SentenceGenerator(8, EMPTY).sentence("zh", i) for i in range(50)]
    assert sum(x != y for x, y in zip(forward, other, strict=True)) > 25


def test_all_categories_and_spoken_has_no_digits() -> None:
    gen = SentenceGenerator(3, EMPTY)
    seen: dict[str, set[str]] = {lang: set() for lang in LANGS}
    for lang in LANGS:
        for i in range(600):
            s = gen.sentence(lang, i)
            seen[lang].add(s.category)
            assert s.lang == lang and s.text and s.spoken
            assert not re.search(r"[0-9%$¥£€]", s.spoken), s
    assert {"everyday", "polyphone", "number", "date", "time", "currency", "long", "compose"} <= seen["zh"]
    assert {"everyday", "heteronym", "number", "date", "time", "currency", "long", "compose"} <= seen["en"]
    assert seen["mixed"] == {"everyday", "compose"}


@pytest.mark.parametrize("mix", sorted(TEXT_MIXES))
def test_mix_weights_and_language_shares_sum_to_one(mix: str) -> None:
    for lang in LANGS:
        assert sum(TEXT_MIXES[mix][lang].values()) == pytest.approx(1.0)
    if mix in LANG_SHARES:
        assert set(LANG_SHARES[mix]) == set(LANGS)
        assert sum(LANG_SHARES[mix].values()) == pytest.approx(1.0)


def test_hand_written_lists_have_no_digits_or_duplicates() -> None:
    for names in HAND_WRITTEN.values():
        for name in names:
            lines = load_list(name)
            assert len(lines) >= 30
            assert len(set(lines)) == len(lines), name
            assert not any(re.search(r"[0-9]", ln) for ln in lines), name


def test_never_emits_eval_sentences() -> None:
    guard = EvalGuard.from_dir()
    if guard.size == 0:
        pytest.skip("no evaluation sentences found (shared/eval)")
    gen = SentenceGenerator(0, guard)
    for lang in LANGS:
        for i in range(1500):
            s = gen.sentence(lang, i)
            assert not guard.refuses(s.text) and not guard.refuses(s.spoken)


def test_guard_refuses_and_generator_redraws(tmp_path: Path) -> None:
    listed = load_list("everyday_en")[0]
    (tmp_path / "sentences_en.txt").write_text(listed.upper() + "\n", encoding="utf-8")
    guard = EvalGuard.from_dir(tmp_path)
    assert guard.refuses(listed) and guard.refuses(listed.rstrip(".") + "!")
    assert not guard.refuses("A sentence nobody wrote down.")
    with pytest.raises(ValueError, match="everyday_en"):
        SentenceGenerator(0, guard)  # a hand-written list containing an eval sentence is refused outright


def test_guard_filters_template_output() -> None:
    """Template sentences that happen to be eval sentences are replaced by a deterministic redraw."""
    gen = SentenceGenerator(5, EMPTY)
    made = [gen.sentence("en", i) for i in range(60)]
    banned = [s.text for s in made if s.category in ("number", "date", "time", "currency", "compose")]
    assert banned
    guarded = SentenceGenerator(5, EvalGuard(banned))
    redrawn = [guarded.sentence("en", i) for i in range(60)]
    assert not any(guarded.guard.refuses(s.text) for s in redrawn)
    assert redrawn == [guarded.sentence("en", i) for i in range(60)]


@pytest.mark.parametrize(
    ("n", "zh", "zh_liang", "en"),
    [
        (0, "零", "零", "zero"),
        (10, "十", "十", "ten"),
        (105, "一百零五", "一百零五", "one hundred five"),
        (1010, "一千零一十", "一千零一十", "one thousand ten"),
        (20500, "二万零五百", "两万零五百", "twenty thousand five hundred"),
        (1002003, "一百万二千零三", "一百万两千零三", "one million two thousand three"),
    ],
)
def test_cardinals(n: int, zh: str, zh_liang: str, en: str) -> None:
    assert vb.zh_int(n) == zh
    assert vb.zh_int(n, liang=True) == zh_liang
    assert vb.en_int(n) == en


def test_dates_times_money() -> None:
    assert vb.zh_date(2023, 5, 6) == ("2023年5月6日", "二零二三年五月六日")
    assert vb.zh_time(15, 30) == ("15:30", "十五点半")
    assert vb.zh_time(2, 5) == ("2:05", "两点零五分")
    assert vb.zh_money_yuan(12850) == ("128.50元", "一百二十八元五角")
    assert vb.zh_money_yuan(1205) == ("12.05元", "十二元零五分")
    assert vb.en_money(1250) == ("$12.50", "twelve dollars and fifty cents")
    assert vb.en_date(2024, 3, 21) == ("March 21st, 2024", "March twenty-first, twenty twenty-four")
    assert vb.en_time(19, 5) == ("7:05 pm", "seven oh five in the evening")
    assert [vb.en_year(y) for y in (1999, 2005, 1905)] == [
        "nineteen ninety-nine",
        "two thousand five",
        "nineteen oh five",
    ]
    assert [vb.en_ordinal(n) for n in (1, 12, 22, 30)] == ["first", "twelfth", "twenty-second", "thirtieth"]
