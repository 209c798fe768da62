"""Compute a model's emotion prosody prior (rtvox.models.prosody) from its training data, calibrated against the
model itself.

1. Data: per utterance of a packed acoustic set, the mean and std of voiced log-F0 and the mean frame energy in
   the speaker's z units (`speaker_prosody_stats`, the units the variance predictors are trained in), and frames
   per phoneme. Per speaker and emotion, relative to the same speaker's neutral clips: pitch shift (difference
   of means), pitch range (ratio of stds), energy shift, duration (ratio of frames per phoneme); then averaged
   over the speakers with at least `min_clips` clips of both (ratios geometrically).
2. Model: the same four quantities of the model's own variance predictions (identity prosody row), per emotion
   relative to neutral, over the built-in voices and CALIBRATION_SENTENCES, each phoneme weighted by its
   predicted frames (a frame-level mean, like the data's).
3. Prior = data − model for the shifts, data / model for the ratios: what the learned conditioning leaves out,
   so applying it does not count the model's own emotion effect twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rtvox.constants import EMOTIONS
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.bundle import CONFIG_NAME, ModelConfig
from rtvox.models.prosody import IDENTITY_ROW, EmotionProsody, ProsodyShift
from rtvox.training.data import AcousticSet, load_acoustic, speaker_prosody_stats

if TYPE_CHECKING:
    from rtvox.runtime.synthesizer import Synthesizer

# Fixed calibration text, written for this purpose (not the evaluation sentences): everyday statements of
# 10-20 syllables in each language the model speaks.
CALIBRATION_SENTENCES: tuple[str, ...] = (
    "The train to the coast leaves from the second platform at noon.",
    "She painted the kitchen a pale shade of green last weekend.",
    "We found an old map of the town in the attic.",
    "Please remember to water the plants before you go out.",
    "The library keeps its quiet reading room open until late.",
    "My brother bought a new bicycle for the ride to work.",
    "明天早上我们一起去菜市场买菜。",
    "他把那本旧书放回了书架上。",
    "这条河的两岸种满了柳树。",
    "周末的时候我喜欢在家里做饭。",
    "妹妹今年九月就要上小学了。",
    "窗外下了一整夜的小雨。",
)
MIN_VOICED_FRAMES = 10  # an utterance with fewer voiced frames has no usable pitch statistics


@dataclass(frozen=True)
class ProsodyStats:
    """One emotion relative to neutral: the four quantities of a ProsodyShift, measured (not yet a prior)."""

    pitch_shift: float
    pitch_range: float
    energy_shift: float
    duration: float
    count: int  # speakers (data) or voices (model) it is averaged over

    def to_dict(self) -> dict[str, float]:
        return {k: v if k == "count" else round(float(v), 4) for k, v in dataclasses.asdict(self).items()}


def _relative(emotional: np.ndarray, neutral: np.ndarray) -> np.ndarray:
    """Rows of (pitch mean, pitch std, energy mean, frames) -> (shift, log range, energy shift, log duration)."""
    return np.array(
        [
            emotional[0] - neutral[0],
            np.log(emotional[1] / neutral[1]),
            emotional[2] - neutral[2],
            np.log(emotional[3] / neutral[3]),
        ]
    )


def _average(relative: list[np.ndarray]) -> ProsodyStats:
    m = np.mean(relative, axis=0)  # the ratios were logs: their mean is a geometric mean
    return ProsodyStats(float(m[0]), float(np.exp(m[1])), float(m[2]), float(np.exp(m[3])), len(relative))


def utterance_prosody(data: AcousticSet) -> np.ndarray:
    """float64 [U, 4] per utterance: mean and std of voiced log-F0 and mean frame energy in the speaker's z
    units, and frames per phoneme; NaN rows for utterances with fewer than MIN_VOICED_FRAMES voiced frames."""
    stats = speaker_prosody_stats(data)  # [S, 4] (f0 mean, f0 std, energy mean, energy std)
    info = data.info
    lengths = np.diff(data.mel_off)
    frame_speaker = np.repeat(data.speaker, lengths)
    utt_of_frame = np.repeat(np.arange(len(data)), lengths)
    scale = (info.mel_hi - info.mel_lo) / (info.mel_levels - 1)
    energy = data.mel.mean(axis=1, dtype=np.float64) * scale + info.mel_lo
    energy_z = (energy - stats[frame_speaker, 2]) / stats[frame_speaker, 3]
    lo, hi = np.log(info.f0_lo), np.log(info.f0_hi)
    voiced = data.f0 > 0
    log_f0 = lo + (data.f0.astype(np.float64) - 1) / 254 * (hi - lo)
    pitch_z = np.where(voiced, (log_f0 - stats[frame_speaker, 0]) / stats[frame_speaker, 1], 0.0)
    n_utt = len(data)
    n_voiced = np.bincount(utt_of_frame, weights=voiced, minlength=n_utt)
    sum_z = np.bincount(utt_of_frame, weights=pitch_z, minlength=n_utt)
    sum_z2 = np.bincount(utt_of_frame, weights=pitch_z**2, minlength=n_utt)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_z = sum_z / n_voiced
        std_z = np.sqrt(np.maximum(sum_z2 / n_voiced - mean_z**2, 0.0))
    mean_e = np.bincount(utt_of_frame, weights=energy_z, minlength=n_utt) / np.maximum(lengths, 1)
    rate = lengths / np.maximum(np.diff(data.ph_off), 1)
    out = np.stack([mean_z, std_z, mean_e, rate], axis=1)
    out[n_voiced < MIN_VOICED_FRAMES] = np.nan
    return out


def data_prosody(data: AcousticSet, min_clips: int = 3) -> dict[str, ProsodyStats]:
    """Emotion -> its prosody relative to neutral in `data`, averaged over speakers with >= min_clips usable
    clips of that emotion and of neutral. Emotions no speaker qualifies for are left out."""
    rows = utterance_prosody(data)
    usable = ~np.isnan(rows).any(axis=1)
    names = data.info.emotions
    neutral = names.index("neutral")
    out: dict[str, ProsodyStats] = {}
    for index, name in enumerate(names):
        if index == neutral:
            continue
        relative = []
        for speaker in np.unique(data.speaker):
            mine = usable & (data.speaker == speaker)
            emo, neu = mine & (data.emotion == index), mine & (data.emotion == neutral)
            if emo.sum() >= min_clips and neu.sum() >= min_clips:
                relative.append(_relative(rows[emo].mean(0), rows[neu].mean(0)))
        if relative:
            out[name] = _average(relative)
    return out


def _weighted(values: torch.Tensor, weights: torch.Tensor) -> tuple[float, float]:
    mean = (values * weights).sum() / weights.sum()
    std = (((values - mean) ** 2 * weights).sum() / weights.sum()).sqrt()
    return float(mean), float(std)


def model_prosody(
    synth: Synthesizer, sentences: Sequence[str] = CALIBRATION_SENTENCES, voices: Sequence[str] | None = None
) -> dict[str, ProsodyStats]:
    """Emotion -> the model's own prosody relative to neutral (identity prosody row, emotion strength 1), from
    its pitch and energy predictors and predicted durations, over `voices` (default: the built-in ones)."""
    from rtvox.runtime.steps import encode_inputs
    from rtvox.runtime.types import SynthesisRequest

    acoustic = synth.bundle.acoustic
    captured: dict[str, torch.Tensor] = {}
    hooks = [
        acoustic.variance.pitch.register_forward_hook(lambda _m, _i, out: captured.__setitem__("pitch", out)),
        acoustic.variance.energy.register_forward_hook(lambda _m, _i, out: captured.__setitem__("energy", out)),
    ]
    per_voice: dict[str, list[np.ndarray]] = {e: [] for e in EMOTIONS if e != "neutral"}
    try:
        for voice in voices or synth.voices.builtin_names:
            measured: dict[str, np.ndarray] = {}
            for emotion in EMOTIONS:
                rows = []
                for text in sentences:
                    prepared = synth.prepare(SynthesisRequest(text=text, voice=voice, emotion=emotion))
                    for chunk in prepared.chunks:
                        inputs = encode_inputs(
                            [(chunk.ids, prepared.cond, prepared.request, 0, IDENTITY_ROW)], synth.device
                        )
                        with torch.inference_mode():
                            _, durations = acoustic.encode(*inputs)
                        w = durations[0].float()
                        pitch_mean, pitch_std = _weighted(captured["pitch"][0], w)
                        energy_mean, _ = _weighted(captured["energy"][0], w)
                        rows.append((pitch_mean, pitch_std, energy_mean, float(w.sum()) / len(chunk.ids)))
                measured[emotion] = np.mean(rows, axis=0)
            for emotion, values in per_voice.items():
                values.append(_relative(measured[emotion], measured["neutral"]))
    finally:
        for hook in hooks:
            hook.remove()
    return {emotion: _average(values) for emotion, values in per_voice.items()}


def residual_prior(data: dict[str, ProsodyStats], model: dict[str, ProsodyStats]) -> dict[str, ProsodyShift]:
    """What the data shows and the model does not do yet: shifts subtract, ratios divide."""
    return {
        emotion: ProsodyShift(
            pitch_shift=d.pitch_shift - model[emotion].pitch_shift,
            pitch_range=d.pitch_range / model[emotion].pitch_range,
            energy_shift=d.energy_shift - model[emotion].energy_shift,
            duration=d.duration / model[emotion].duration,
        )
        for emotion, d in data.items()
        if emotion in model
    }


def compute_prior(
    data: AcousticSet, synth: Synthesizer, *, source: dict[str, Any] | None = None, min_clips: int = 3
) -> EmotionProsody:
    """The calibrated prior of `synth`'s model from `data`, with its provenance and both measurements."""
    measured = data_prosody(data, min_clips=min_clips)
    own = model_prosody(synth)
    return EmotionProsody(
        residual_prior(measured, own),
        {
            **(source or {}),
            "method": "data minus model (shifts), data / model (ratios); rtvox.training.prosody_prior",
            "model_version": synth.bundle.config.version,
            "utterances": len(data),
            "min_clips": min_clips,
            "calibration": {"voices": list(synth.voices.builtin_names), "sentences": len(CALIBRATION_SENTENCES)},
            "data_prosody": {e: s.to_dict() for e, s in measured.items()},
            "model_prosody": {e: s.to_dict() for e, s in own.items()},
        },
    )


def write_prior(model_dir: Path, prior: EmotionProsody) -> ModelConfig:
    """Set `emotion_prosody` in MODEL_DIR/config.json (atomically); every other key stays as it was."""
    path = model_dir / CONFIG_NAME
    config = dataclasses.replace(
        ModelConfig.from_dict(json.loads(path.read_text(encoding="utf-8"))), emotion_prosody=prior
    )
    atomic_write_bytes(path, (json.dumps(config.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return config


def prosody_prior_for(model_dir: Path, data: AcousticSet, data_dir: Path) -> EmotionProsody:
    """Compute the prior of the model in `model_dir` from `data` (loaded from `data_dir`) and write it there."""
    from rtvox.runtime.synthesizer import Synthesizer

    synth = Synthesizer(model_dir, device="cpu")
    shards = sorted(p.name for p in data_dir.glob("acoustic-*.npz.xz"))
    prior = compute_prior(data, synth, source={"data": str(data_dir), "shards": shards})
    write_prior(model_dir, prior)
    return prior


def prosody_prior_command(data_dir: Path, model_dir: Path) -> EmotionProsody:
    """`rtvox train prosody-prior`: load the packed data, compute, write."""
    return prosody_prior_for(model_dir, load_acoustic(data_dir), data_dir)
