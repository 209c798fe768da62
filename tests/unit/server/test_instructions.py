"""The zh/en instructions mapper: emotion, intensity and pace from free text."""

from __future__ import annotations

import pytest

from rtvox.constants import EMOTIONS
from rtvox.server.instructions import MILD, NORMAL, PACE_FACTOR, STRONG, parse_instructions


@pytest.mark.parametrize(
    ("text", "emotion", "intensity"),
    [
        ("say it angrily", "angry", NORMAL),
        ("Say it VERY angrily!", "angry", STRONG),
        ("slightly annoyed", "angry", MILD),
        ("furious", "angry", STRONG),
        ("Speak in a cheerful and positive tone.", "happy", NORMAL),
        ("I am so happy", "happy", STRONG),
        ("a little sad", "sad", MILD),
        ("unhappy", "sad", NORMAL),
        ("sound surprised", "surprised", NORMAL),
        ("terrified whisper", "fearful", STRONG),
        ("with disgust", "disgusted", NORMAL),
        ("not angry, just calm", "neutral", NORMAL),
        ("用开心的语气", "happy", NORMAL),
        ("非常生气地说", "angry", STRONG),
        ("有点难过", "sad", MILD),
        ("很不开心", "sad", STRONG),
        ("不要生气，要平静", "neutral", NORMAL),
        ("用愤怒的语气", "angry", NORMAL),
        ("惊讶", "surprised", NORMAL),
        ("害怕", "fearful", NORMAL),
        ("恶心", "disgusted", NORMAL),
        ("happy then sad", "happy", NORMAL),  # the first emotion named wins
    ],
)
def test_emotion_and_intensity(text: str, emotion: str, intensity: float) -> None:
    style = parse_instructions(text)
    assert style.emotion == emotion
    assert style.intensity == pytest.approx(intensity)
    assert style.emotion in EMOTIONS


@pytest.mark.parametrize(
    "text",
    [
        None, "", "   ", "made a decision", "read the numbers clearly", "不要生气",
        # words that start like an emotion word and are none
        "Explain what happened.", "Read the Amazon product description.", "Describe the saddle.",
        "a gladiator's speech", "press the joystick", "the gross domestic product fell",
    ],
)  # fmt: skip
def test_no_emotion(text: str | None) -> None:
    assert parse_instructions(text).emotion is None


@pytest.mark.parametrize(
    ("text", "pace"),
    [
        ("speak slowly", 1 / PACE_FACTOR),
        ("a bit faster please", PACE_FACTOR),
        ("慢一点", 1 / PACE_FACTOR),
        ("快一点，兴奋一些", PACE_FACTOR),
        ("slowly then quickly", 1.0),  # contradictory: no change
        ("calm", 1.0),
    ],
)
def test_pace(text: str, pace: float) -> None:
    assert parse_instructions(text).pace == pytest.approx(pace)


def test_modifier_does_not_cross_a_clause() -> None:
    assert parse_instructions("faster, happy").intensity == NORMAL
    assert parse_instructions("快一点，兴奋").intensity == NORMAL


def test_matched_names_the_keyword() -> None:
    assert parse_instructions("please sound angry").matched == ("angry",)
