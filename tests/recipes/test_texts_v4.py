"""Text mix v4, the English-first top-up: its categories and language shares, the new hand-written English list,
the English lexicon frames, and the held-out check sentences that the eval guard now refuses too."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from recipes.corpus.plan import CorpusPlan
from recipes.corpus.templates import EN_LEXICON_FRAMES, HAND_WRITTEN, _en_lexicon, _en_words
from recipes.corpus.texts import (
    CATEGORY_WEIGHTS_V4,
    HELDOUT_SENTENCES_GLOB,
    LANGS,
    EvalGuard,
    SentenceGenerator,
    load_list,
)

EMPTY = EvalGuard([])
REPO = Path(__file__).resolve().parents[2]
EN_LINE = re.compile(r"[A-Za-z][A-Za-z ,.?!';:-]*[.?!]")


def test_v4_plan_is_english_first_for_every_speaker() -> None:
    n = 1500
    v4 = CorpusPlan(7, None, SentenceGenerator(7, EMPTY, text_mix="v4"))
    langs = Counter(v4[i].lang for i in range(n))
    assert 0.67 < langs["en"] / n < 0.77
    zh_native = [v4[i] for i in range(n) if v4[i].speaker.native_lang == "zh"]
    assert sum(u.lang == "en" for u in zh_native) / len(zh_native) > 0.6  # not only the en-native voices


def test_v4_draws_the_new_list_lexicon_and_long_sentences() -> None:
    gen = SentenceGenerator(4, EMPTY, text_mix="v4")
    n = 2000
    en = [gen.sentence("en", i) for i in range(n)]
    cats = Counter(s.category for s in en)
    assert 0.45 < cats["everyday3"] / n < 0.55 and 0.11 < cats["lexicon"] / n < 0.19 and cats["long3"] > 80
    listed = set(load_list("everyday3_en"))
    assert all(s.text in listed for s in en if s.category == "everyday3")
    assert len({s.text for s in en if s.category == "everyday3"}) > 600
    for s in en:
        if s.category == "long3":
            assert s.text == s.spoken and len(s.text.split()) > 12, s.text
    # zh and mixed draw as in v3 / v2
    assert CATEGORY_WEIGHTS_V4["zh"]["everyday3"] == pytest.approx(0.45)


def test_everyday3_en_format_size_and_vocabulary() -> None:
    assert "everyday3_en" in HAND_WRITTEN["en"]
    lines = load_list("everyday3_en")
    assert len(lines) >= 2000
    assert len({ln.lower() for ln in lines}) == len(lines)  # no duplicates
    for line in lines:
        assert EN_LINE.fullmatch(line), line
        assert 5 <= len(line.split()) <= 30, line
    words = {w.strip(",.?!;:'-").lower() for ln in lines for w in ln.split()}
    old = {w.strip(",.?!;:'-").lower() for ln in load_list("everyday_en") for w in ln.split()}
    assert len(words) > 4000 and len(words - old) > 3000  # the point of the list: words the v1 list never had


def _frame_pattern(frame: str) -> str:
    return re.sub(r"\\\{[nva]\d\\\}", "([a-z]+)", re.escape(frame))


def test_english_lexicon_frames_fill_every_slot_with_listed_words() -> None:
    words = _en_words()
    assert len(words["n"]) >= 1500 and len(words["v"]) >= 600 and len(words["a"]) >= 400
    tags: dict[str, str] = {}
    for tag, group in words.items():
        for w in group:
            assert re.fullmatch(r"[a-z]+", w) and w not in tags, w  # lowercase letters, each word under one tag
            tags[w] = tag
    seen = set()
    for i in range(400):
        text, spoken = _en_lexicon(random.Random(i))
        assert text == spoken and "{" not in text
        matches = [(f, m) for f in EN_LEXICON_FRAMES if (m := re.fullmatch(_frame_pattern(f), text))]
        assert len(matches) == 1, text
        frame, filled = matches[0]
        seen.add(frame)
        slots = re.findall(r"\{([nva])\d\}", frame)
        assert [tags.get(w) for w in filled.groups()] == slots, text
    assert len(seen) == len(EN_LEXICON_FRAMES)


def test_guard_refuses_the_repos_heldout_check_sentences(tmp_path: Path) -> None:
    files = sorted(REPO.glob(HELDOUT_SENTENCES_GLOB))
    if not files:
        pytest.skip("no held-out check sentences in this checkout")
    (tmp_path / "sentences_x.txt").write_text("An unrelated evaluation line for this test only.\n", "utf-8")
    guard = EvalGuard.from_dir(tmp_path)
    held = [ln for f in files for ln in f.read_text("utf-8").splitlines() if ln.strip()]
    assert held and all(guard.refuses(ln) for ln in held)
    assert guard.refuses("an unrelated evaluation line for this test only")
    assert not guard.refuses("A sentence that appears in no evaluation set at all.")


def test_v4_never_emits_eval_sentences() -> None:
    guard = EvalGuard.from_dir()
    if guard.size == 0:
        pytest.skip("no evaluation sentences found (shared/eval)")
    gen = SentenceGenerator(0, guard, text_mix="v4")
    for lang in LANGS:
        for i in range(600):
            s = gen.sentence(lang, i)
            assert not guard.refuses(s.text) and not guard.refuses(s.spoken)
