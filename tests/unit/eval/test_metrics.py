"""Golden cases of the scoring normalization and the error-rate arithmetic."""

from __future__ import annotations

import pytest

from rtvox.eval.metrics import ErrorCounts, edit_counts, normalize_for_scoring, primary_metric, score, tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "hello world"),
        ("It’s 25% off.", "it's twenty five percent off"),
        ("Dr. Smith arrived at 10:30.", "doctor smith arrived at ten thirty"),
        ("OK, see you.", "okay see you"),
        ("我有3个苹果。", "我 有 三 个 苹 果"),
        ("會議結束以後", "会 议 结 束 以 后"),  # Traditional → Simplified
        ("请把PDF发到我的e-mail。", "请 把 pdf 发 到 我 的 email"),
        ("well-known  “quotes”", "well known quotes"),
    ],
)
def test_normalize_for_scoring(text: str, expected: str) -> None:
    assert normalize_for_scoring(text) == expected


def test_digits_in_a_hypothesis_match_words_in_the_reference() -> None:
    assert score("I have three apples.", "I have 3 apples", "en")["wer"].errors == 0
    assert score("今天二十五度。", "今天25度", "zh")["cer"].errors == 0


def test_whisper_dotted_clock_time_reads_as_the_time() -> None:
    assert normalize_for_scoring("闹钟定在15.40分") == normalize_for_scoring("闹钟定在15:40。")
    assert normalize_for_scoring("价格是12.45元") == "价 格 是 十 二 点 四 五 元"  # a decimal stays a decimal
    assert normalize_for_scoring("opens at 6.30. Every day") == normalize_for_scoring("opens at six thirty every day")
    assert normalize_for_scoring("a table at 7.15 tonight") == normalize_for_scoring("a table at 7:15 tonight")
    assert normalize_for_scoring("it weighs 6.30 kilos") == normalize_for_scoring(
        "it weighs six point three zero kilos"
    )


def test_edit_counts_classifies_operations() -> None:
    counts = edit_counts(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"])
    assert (counts.substitutions, counts.deletions, counts.insertions, counts.reference_length) == (1, 0, 1, 4)
    assert counts.rate == pytest.approx(0.5)
    deleted = edit_counts(["a", "b", "c"], ["a"])
    assert (deleted.deletions, deleted.errors) == (2, 2)


def test_empty_reference_and_hypothesis() -> None:
    assert edit_counts([], []).rate == 0.0
    assert edit_counts([], ["a"]).rate == 1.0
    assert edit_counts(["a", "b"], []).rate == 1.0


def test_error_counts_pool_by_summing() -> None:
    pooled = ErrorCounts(1, 0, 0, 10) + ErrorCounts(0, 1, 1, 5)
    assert pooled == ErrorCounts(1, 1, 1, 15)
    assert pooled.rate == pytest.approx(3 / 15)


def test_english_wer_golden() -> None:
    counts = score("The museum opens at nine.", "the museum open at nine", "en")["wer"]
    assert (counts.errors, counts.reference_length) == (1, 5)


def test_chinese_cer_counts_characters() -> None:
    counts = score("我想要一杯咖啡。", "我想要一杯卡非", "zh")["cer"]
    assert (counts.substitutions, counts.reference_length) == (2, 7)


def test_mixed_reports_han_word_and_combined_rates() -> None:
    result = score("我今天要开一个很重要的meeting。", "我今天要開一個很重要的meetings", "mixed")
    assert set(result) == {"cer", "wer", "mer"}
    assert (result["cer"].errors, result["cer"].reference_length) == (0, 11)
    assert (result["wer"].errors, result["wer"].reference_length) == (1, 1)
    assert (result["mer"].errors, result["mer"].reference_length) == (1, 12)


def test_unknown_language_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown language"):
        score("a", "a", "fr")


def test_tokens_drop_stray_apostrophes_and_primary_metrics() -> None:
    assert tokens("'tis rock 'n' roll") == ["tis", "rock", "n", "roll"]
    assert [primary_metric(lang) for lang in ("en", "zh", "mixed")] == ["wer", "cer", "mer"]


def test_agrees_with_jiwer_on_word_error_rate() -> None:
    jiwer = pytest.importorskip("jiwer")
    ref, hyp = "the cat sat on the mat today", "a cat sat on mat to day"
    ours = edit_counts(ref.split(), hyp.split())
    assert ours.rate == pytest.approx(jiwer.wer(ref, hyp))
