"""The Frontend end to end: mixed-language text, inline markup, lexicon files, errors, JSON, isolation."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rtvox.errors import TextError
from rtvox.text import Frontend, Lexicon, Vocabulary

Pinyin = Callable[[str], list[str]]


def test_mixed_text_keeps_english_runs(frontend: Frontend) -> None:
    tokens = frontend.tokenize("我们下周去New York出差")
    assert [(t.text, t.lang) for t in tokens] == [
        ("我们", "zh"),
        ("下周", "zh"),
        ("去", "zh"),
        ("New", "en"),
        ("York", "en"),
        ("出差", "zh"),
    ]
    assert tokens[3].pinyin is None and tokens[3].phonemes[0] == "en:n"


def test_segment_reports_runs_by_script(frontend: Frontend) -> None:
    assert frontend.segment("我爱Python编程") == [("zh", "我爱"), ("en", "Python"), ("zh", "编程")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("我有3个apple", "我有三个apple"), ("I have 3 apples", "I have three apples")],
)
def test_digits_read_in_the_language_around_them(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected


def test_other_scripts_are_reported_not_dropped(frontend: Frontend) -> None:
    result = frontend.process("Hello こんにちは 😀 你好")
    langs = {t.text: t.lang for t in result.tokens}
    assert langs == {"Hello": "en", "こんにちは": "ja", "😀": "other", "你好": "zh"}
    skipped = [t for t in result.tokens if t.lang in ("ja", "other")]
    assert all(t.phonemes == () for t in skipped)
    assert any("こんにちは" in w for w in result.warnings)
    assert any("😀" in w for w in result.warnings)
    assert result.chunks[0].phonemes[-1] == "#4"


def test_skipped_text_warnings_count_in_words(frontend: Frontend) -> None:
    one = frontend.process("Hello Привет.").warnings
    assert one == ("skipped 1 piece of text in a script rtvox does not read: 'Привет'; it is not spoken",)
    (two,) = frontend.process("Hello Привет, мир.").warnings
    assert two.startswith("skipped 2 pieces of text") and two.endswith("they are not spoken")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cafe\u0301 ok", [("Café", "en"), ("ok", "en")]),  # a generic accent stays on its letter
        ("A\u0d3b b", [("A", "en"), ("\u0d3b", "other"), ("b", "en")]),  # a Malayalam sign does not
        ("नमस्ते hi", [("नमस्ते", "hi"), ("hi", "en")]),  # Devanagari signs stay in their Devanagari word
        ("a\u0915\u094d", [("a", "en"), ("\u0915\u094d", "hi")]),
    ],
)
def test_combining_marks_join_only_letters_they_can_belong_to(
    frontend: Frontend, text: str, expected: list[tuple[str, str]]
) -> None:
    result = frontend.process(text)
    assert [(t.text, t.lang) for t in result.tokens] == expected
    # English words are read by espeak-ng: a foreign sign inside one made it switch voices mid-word and emit
    # phones outside the vocabulary (found by the property test on "A\u0d3b").
    vocab = Vocabulary.default()
    assert all(vocab.unk_id not in vocab.encode(chunk.phonemes) for chunk in result.chunks)


def test_only_unsupported_script_gives_warnings_and_no_chunks(frontend: Frontend) -> None:
    result = frontend.process("Привет")
    assert [(t.text, t.lang) for t in result.tokens] == [("Привет", "ru")]
    assert result.chunks == () and result.warnings


@pytest.mark.parametrize("text", ["", "   \n\t ", "，。！？", "...!!!", "()[]{}—"])
def test_nothing_to_speak_is_a_text_error(frontend: Frontend, text: str) -> None:
    with pytest.raises(TextError, match="nothing to speak"):
        frontend.process(text)


def test_non_string_input_is_a_text_error(frontend: Frontend) -> None:
    with pytest.raises(TextError, match="must be a string"):
        frontend.process(b"bytes")  # type: ignore[arg-type]


# ---------------------------------------------------------------- inline markup
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("还[huan2]钱", "huan2 qian2"),
        ("我还[hai2]钱", "wo3 hai2 qian2"),
        ("他长[chang2]大了", "ta1 chang2 da4 le5"),
        ("银行[yin2 xing2]", "yin2 xing2"),
        ("还[huán]钱", "huan2 qian2"),
        ("一[yi1]个", "yi1 ge4"),
        ("{重庆|zhong4 qing4}", "zhong4 qing4"),
    ],
)
def test_inline_pinyin_overrides(pinyin: Pinyin, text: str, expected: str) -> None:
    assert pinyin(text) == expected.split()


def test_inline_markup_is_removed_from_normalized_text(frontend: Frontend) -> None:
    assert frontend.normalize("我还[huan2]了3本书") == "我还了三本书"
    assert frontend.normalize("I like {kokoro|kˈoʊkəɹoʊ} a lot") == "I like kokoro a lot"


def test_inline_ipa_for_english(frontend: Frontend) -> None:
    tokens = frontend.tokenize("I like {kokoro|kˈoʊkəɹoʊ} a lot")
    (kokoro,) = [t for t in tokens if t.text == "kokoro"]
    assert kokoro.phonemes == ("en:k", "en:ˈ", "en:oʊ", "en:k", "en:ə", "en:ɹ", "en:oʊ")


def test_citation_brackets_stay_text(frontend: Frontend) -> None:
    assert frontend.normalize("见文献[1]") == "见文献[一]"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("还[xyz9]钱", "xyz9"),
        ("还[huan6]钱", "huan6"),
        ("还[huan2 qian2]", "2 syllables"),
        ("还[huan2钱", "lacks ']'"),
        ("{word|}", "pronunciation"),
        ("{kokoro|kˈoʊqqq}", "not an en-us phone"),
        ("{kokoro|kˈoʊ", "not closed"),
    ],
)
def test_malformed_markup_is_a_text_error(frontend: Frontend, text: str, needle: str) -> None:
    with pytest.raises(TextError, match=needle):
        frontend.process(text)


# ---------------------------------------------------------------- lexicon
def test_lexicon_tsv(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.tsv"
    path.write_text("# my words\n重庆\tzhong4 qing4\nkokoro\tkˈoʊkəɹoʊ\n\n蔚来\twei4 lai2\n", encoding="utf-8")
    lexicon = Lexicon.load(path)
    assert len(lexicon) == 3
    frontend = Frontend(lexicon)
    tokens = frontend.tokenize("我去重庆看蔚来，Kokoro")
    assert [s for t in tokens if t.lang == "zh" and t.pinyin for s in t.pinyin] == [
        "wo3",
        "qu4",
        "zhong4",
        "qing4",
        "kan4",
        "wei4",
        "lai2",
    ]
    assert tokens[-1].phonemes == ("en:k", "en:ˈ", "en:oʊ", "en:k", "en:ə", "en:ɹ", "en:oʊ")


def test_user_lexicon_beats_the_builtin_table(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.tsv"
    path.write_text("银行\tyin2 xing2\n", encoding="utf-8")
    assert Frontend(Lexicon.load(path)).tokenize("银行")[0].pinyin == ("yin2", "xing2")


def test_lexicon_json(tmp_path: Path) -> None:
    path = tmp_path / "words.dat"  # the format is read from the content, not the name
    path.write_text(json.dumps({"行": "xing2", "GIF": "dʒˈɪf"}, ensure_ascii=False), encoding="utf-8")
    frontend = Frontend(Lexicon.load(path))
    assert frontend.tokenize("GIF")[0].phonemes == ("en:dʒ", "en:ˈ", "en:ɪ", "en:f")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("重庆\tchong2\n", "2 characters but 1 syllables"),
        ("重庆 chong2 qing4\n", "word<TAB>pronunciation"),
        ("重庆\tchong9 qing4\n", "pinyin syllable"),
        ("kokoro\tk0k0\n", "not an en-us phone"),
        ("3D\tθɹiː\n", "Chinese characters"),
        ('{"a": 1}', "must map to a string"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_lexicon_entries_are_named(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "lexicon.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TextError, match=needle):
        Lexicon.load(path)


def test_missing_lexicon_file(tmp_path: Path) -> None:
    with pytest.raises(TextError, match="does not exist"):
        Lexicon.load(tmp_path / "nope.tsv")


# ---------------------------------------------------------------- result shape
def test_to_dict_is_json_ready(frontend: Frontend) -> None:
    data = frontend.process("重庆很好。Hello!").to_dict()
    assert set(data) == {"normalized", "tokens", "chunks", "warnings"}
    assert data["tokens"][0] == {
        "text": "重庆",
        "lang": "zh",
        "pinyin": ["chong2", "qing4"],
        "phonemes": ["zh:ch", "zh:ong2", "zh:q", "zh:ing4"],
    }
    assert data["tokens"][-1]["pinyin"] is None
    assert set(data["chunks"][0]) == {"text", "phonemes"}
    json.dumps(data, ensure_ascii=False)


@pytest.mark.parametrize(
    ("text", "boundaries"),
    [
        ("你好，世界。", ["#3", "#4"]),
        ("你好吗？", ["#1", "#4?"]),
        ("Hello world!", ["#1", "#4!"]),
        ("“你好”他说", ["#2", "#1", "#4"]),
        ("well-known", ["#1", "#4"]),
    ],
)
def test_prosody_boundaries(frontend: Frontend, text: str, boundaries: list[str]) -> None:
    assert [p for p in frontend.phonemize(text) if p.startswith("#")] == boundaries


def test_frontend_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from rtvox.text import Frontend\n"
        "Frontend().process('你好, hello 3个')\n"
        "assert 'torch' not in sys.modules, 'rtvox.text imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_hundred_thousand_characters_finish_quickly(frontend: Frontend) -> None:
    paragraph = (
        "我们下周去New York出差，顺便看看朋友。今天是2024年3月5日，气温-5℃，银行行长说利率还会下降3.5%。"
        "I paid $3.50 for 2 apples at 10:30 am! 他说：“你好吗？”"
    )
    text = (paragraph * (100_000 // len(paragraph) + 1))[:100_000]
    start = time.perf_counter()
    result = frontend.process(text)
    assert time.perf_counter() - start < 15.0
    assert len(result.chunks) > 100


@pytest.mark.parametrize(
    "word", ["ACGT" * 150, "a" * 600, "ThisIsAVeryLongCamelCaseIdentifier" * 6, "qwrtzpsdfghjklxcvbnm" * 12]
)
def test_a_very_long_word_is_read_whole_in_pieces_that_fit_a_chunk(frontend: Frontend, word: str) -> None:
    """espeak-ng drops the end of a very long word, and one word must fit a chunk: such a word is read in pieces
    (cut where the case changes, then evenly), every phone kept, every chunk within the engines' limit."""
    from rtvox.constants import MAX_CHUNK_PHONEMES

    result = frontend.process(word)
    assert len(result.chunks) > 1 and all(len(c.phonemes) <= MAX_CHUNK_PHONEMES for c in result.chunks)
    assert "".join(t.text for t in result.tokens) == word  # the pieces tile the word
    half = frontend.process(word[: len(word) // 2])
    phones = sum(len(c.phonemes) for c in result.chunks)
    assert phones > 1.7 * sum(len(c.phonemes) for c in half.chunks)  # nothing dropped from the end


def test_long_word_pieces_follow_case_changes_and_ordinary_words_stay_whole(frontend: Frontend) -> None:
    camel = "getUserAccountSettingsFromTheRemoteDatabaseServer"
    pieces = [t.text for t in frontend.process(camel).tokens]
    assert pieces == ["get", "User", "Account", "Settings", "From", "The", "Remote", "Database", "Server"]
    first = frontend.process("pneumonoultramicroscopic is long").tokens[0]
    assert first.text == "pneumonoultramicroscopic"
