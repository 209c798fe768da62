"""Free-text style instructions ("say it angrily", "用开心的语气") → an emotion label, an intensity and a pace.

A small keyword reader, not a language model: it finds the first emotion word that is not negated, reads
intensity from the words just before it (or from the emotion word itself: "furious" is stronger than "annoyed"),
and picks up pace words ("slowly", "快一点"). Text it does not understand gives no change, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rtvox.constants import EMOTION_ALPHA_MAX, EMOTIONS

MILD = 0.5
NORMAL = 1.0
STRONG = 1.5
# Pace words nudge the speaking rate by this factor (multiplied into the requested speed).
PACE_FACTOR = 1.2

# Keyword → (emotion, built-in strength). English entries are word stems matched at a word start.
_EN: dict[str, tuple[str, float]] = {
    "neutral": ("neutral", NORMAL), "calm": ("neutral", NORMAL), "flat": ("neutral", NORMAL),
    "plain": ("neutral", NORMAL), "monoton": ("neutral", NORMAL), "matter-of-fact": ("neutral", NORMAL),
    "happ": ("happy", NORMAL), "cheer": ("happy", NORMAL), "joy": ("happy", NORMAL), "glad": ("happy", NORMAL),
    "excit": ("happy", NORMAL), "delight": ("happy", NORMAL), "upbeat": ("happy", NORMAL),
    "enthusias": ("happy", NORMAL), "ecstatic": ("happy", STRONG), "elated": ("happy", STRONG),
    "sad": ("sad", NORMAL), "unhapp": ("sad", NORMAL), "sorrow": ("sad", NORMAL), "melanchol": ("sad", NORMAL),
    "gloom": ("sad", NORMAL), "depress": ("sad", NORMAL), "tearful": ("sad", NORMAL), "somber": ("sad", NORMAL),
    "heartbroken": ("sad", STRONG), "devastat": ("sad", STRONG), "grief": ("sad", STRONG),
    "angr": ("angry", NORMAL), "mad": ("angry", NORMAL), "irritat": ("angry", MILD), "annoy": ("angry", MILD),
    "frustrat": ("angry", NORMAL), "furious": ("angry", STRONG), "rage": ("angry", STRONG),
    "enrag": ("angry", STRONG), "outrag": ("angry", STRONG), "livid": ("angry", STRONG),
    "surpris": ("surprised", NORMAL), "amaz": ("surprised", NORMAL), "astonish": ("surprised", STRONG),
    "shock": ("surprised", STRONG), "stunned": ("surprised", STRONG),
    "fear": ("fearful", NORMAL), "scared": ("fearful", NORMAL), "afraid": ("fearful", NORMAL),
    "nervous": ("fearful", MILD), "anxious": ("fearful", MILD), "worried": ("fearful", MILD),
    "terrified": ("fearful", STRONG), "panic": ("fearful", STRONG), "frighten": ("fearful", NORMAL),
    "disgust": ("disgusted", NORMAL), "gross": ("disgusted", NORMAL), "repuls": ("disgusted", STRONG),
    "revolt": ("disgusted", STRONG), "contempt": ("disgusted", NORMAL),
}  # fmt: skip

_ZH: dict[str, tuple[str, float]] = {
    "平静": ("neutral", NORMAL), "冷静": ("neutral", NORMAL), "平淡": ("neutral", NORMAL), "中性": ("neutral", NORMAL),
    "开心": ("happy", NORMAL), "高兴": ("happy", NORMAL), "快乐": ("happy", NORMAL), "愉快": ("happy", NORMAL),
    "兴奋": ("happy", NORMAL), "欢快": ("happy", NORMAL), "喜悦": ("happy", NORMAL), "狂喜": ("happy", STRONG),
    "难过": ("sad", NORMAL), "伤心": ("sad", NORMAL), "悲伤": ("sad", NORMAL), "忧伤": ("sad", NORMAL),
    "不开心": ("sad", NORMAL), "不高兴": ("sad", NORMAL), "沮丧": ("sad", NORMAL), "失落": ("sad", MILD),
    "悲痛": ("sad", STRONG),
    "生气": ("angry", NORMAL), "愤怒": ("angry", NORMAL), "恼火": ("angry", NORMAL), "气愤": ("angry", NORMAL),
    "发火": ("angry", NORMAL), "不耐烦": ("angry", MILD), "暴怒": ("angry", STRONG), "怒": ("angry", NORMAL),
    "惊讶": ("surprised", NORMAL), "吃惊": ("surprised", NORMAL), "惊奇": ("surprised", NORMAL),
    "震惊": ("surprised", STRONG),
    "害怕": ("fearful", NORMAL), "恐惧": ("fearful", NORMAL), "紧张": ("fearful", MILD), "担心": ("fearful", MILD),
    "惊恐": ("fearful", STRONG),
    "厌恶": ("disgusted", NORMAL), "恶心": ("disgusted", NORMAL), "嫌弃": ("disgusted", NORMAL),
    "反感": ("disgusted", NORMAL),
}  # fmt: skip

_EN_STRONG = ("very", "really", "extremely", "super", "so", "incredibly", "truly", "totally", "quite", "deeply")
_EN_MILD = ("slightly", "somewhat", "mildly", "gently", "a bit", "a little", "a touch", "kind of", "kinda", "faintly")
_EN_NEGATION = ("not", "don't", "dont", "do not", "never", "no", "without", "isn't", "aren't", "less")
_ZH_STRONG = ("非常", "特别", "极其", "超级", "十分", "很", "极", "太", "超", "格外", "无比")
_ZH_MILD = ("有点", "有些", "稍微", "略微", "略", "一点", "微微", "稍")
_ZH_NEGATION = ("不要", "别", "不", "没有", "没", "勿", "无需")

# Words that begin with a stem of _EN and mean something else.
_EN_NOT_EMOTIONS = (
    "happen", "amazon", "saddl", "sadis", "gladiat", "gladiol", "joystick", "joyrid", "fearless", "calmar",
    "flatter", "shockproof", "madam", "sadhu",
)  # fmt: skip
_GROSS_AMOUNT = re.compile(r"\s+(domestic|national|income|margin|profit|revenue|sales|weight|pay|salary|amount)")

_EN_SLOW = re.compile(r"\b(slow(ly|er)?|unhurried)\b")
_EN_FAST = re.compile(r"\b(fast(er)?|quick(ly|er)?|rapid(ly)?|hurr(y|ied))\b")
_ZH_SLOW = ("慢",)
_ZH_FAST = ("快",)

_CLAUSE_BREAK = re.compile(r"[,.;:!?，。；：！？、]")
# How many characters before a keyword are searched for a modifier or a negation.
_EN_WINDOW = 24
_ZH_WINDOW = 4


@dataclass(frozen=True)
class Style:
    """What the instructions asked for; None/1.0 fields mean "not said"."""

    emotion: str | None = None  # one of EMOTIONS
    intensity: float = NORMAL  # emotion_alpha, 0..EMOTION_ALPHA_MAX
    pace: float = 1.0  # multiplies the requested speed
    matched: tuple[str, ...] = ()  # the keywords that decided it, for logs and tests


def parse_instructions(text: str | None) -> Style:
    """Read emotion, intensity and pace from free text in English, Chinese or both."""
    if not text or not text.strip():
        return Style()
    lowered = text.lower()
    pace = _pace(lowered, text)
    hits = sorted(_find_en(lowered) + _find_zh(text))
    if not hits:
        return Style(pace=pace)
    _, word, emotion, intensity = hits[0]  # the first emotion named wins
    assert emotion in EMOTIONS
    return Style(emotion=emotion, intensity=min(max(intensity, 0.0), EMOTION_ALPHA_MAX), pace=pace, matched=(word,))


def _find_en(lowered: str) -> list[tuple[int, str, str, float]]:
    hits = []
    for stem, (label, strength) in _EN.items():
        for match in re.finditer(r"(?<![a-z])" + re.escape(stem) + r"[a-z-]*", lowered):
            word = match.group(0)
            if stem == "mad" and word not in ("mad", "madly"):
                continue  # "made", "madam"
            if word.startswith(_EN_NOT_EMOTIONS):
                continue  # a word that starts like an emotion but is none ("happened", "Amazon", "saddle")
            if stem == "gross" and _GROSS_AMOUNT.match(lowered, match.end()):
                continue  # "gross domestic product", "gross income"
            before = _clause_tail(lowered[max(0, match.start() - _EN_WINDOW) : match.start()])
            words_before = re.findall(r"[a-z']+", before)[-3:]
            joined = " ".join(words_before)
            if any(_has_phrase(joined, neg) for neg in _EN_NEGATION):
                continue
            hits.append((match.start(), word, label, _modified(strength, joined, _EN_STRONG, _EN_MILD, en=True)))
    return hits


def _find_zh(text: str) -> list[tuple[int, str, str, float]]:
    hits = []
    for word, (label, strength) in _ZH.items():
        start = text.find(word)
        while start >= 0:
            before = _clause_tail(text[max(0, start - _ZH_WINDOW) : start])
            negated = any(before.endswith(neg) or before.endswith(neg + "要") for neg in _ZH_NEGATION)
            # "不耐烦" holds its own 不; "怒" alone must not re-match inside 愤怒/暴怒.
            inside_longer = any(
                other != word
                and word in other
                and text.find(other, max(0, start - len(other)), start + len(other)) >= 0
                for other in _ZH
            )
            if not negated and not inside_longer:
                hits.append((start, word, label, _modified(strength, before, _ZH_STRONG, _ZH_MILD, en=False)))
            start = text.find(word, start + 1)
    return hits


def _clause_tail(before: str) -> str:
    """The part of `before` after the last punctuation: modifiers and negations do not cross a clause."""
    return _CLAUSE_BREAK.split(before)[-1]


def _has_phrase(words: str, phrase: str) -> bool:
    return re.search(r"(?<![a-z'])" + re.escape(phrase) + r"(?![a-z'])", words) is not None


def _modified(strength: float, before: str, strong: tuple[str, ...], mild: tuple[str, ...], *, en: bool) -> float:
    def found(options: tuple[str, ...]) -> bool:
        if en:
            return any(_has_phrase(before, w) for w in options)
        return any(w in before for w in options)

    if found(mild):
        return MILD if strength <= NORMAL else NORMAL
    if found(strong):
        return min(strength + 0.5, EMOTION_ALPHA_MAX)
    return strength


def _pace(lowered: str, text: str) -> float:
    slow = _EN_SLOW.search(lowered) is not None or any(w in text for w in _ZH_SLOW)
    fast = _EN_FAST.search(lowered) is not None or any(w in text for w in _ZH_FAST)
    if slow == fast:
        return 1.0
    return 1 / PACE_FACTOR if slow else PACE_FACTOR
