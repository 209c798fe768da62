"""Compute a model's emotion prosody prior (rtvox.models.prosody) from its training data, calibrated against the
model itself.

1. Data: per utterance of a packed acoustic set, the emotion judge's kind of clip features, from the packed
   log-mel and F0 (the same tracker and mel the judge uses): voiced log-F0 mean, log std, 10th and 90th
   percentiles and final slope, speech energy (dB), spectral tilt, and log frames per phoneme. Per speaker and
   emotion, the difference of means to the same speaker's neutral clips; then the mean over the speakers with
   at least `min_clips` clips of both.
2. Model: the same features of the model's own renderings (the whole pipeline, vocoder included, features
   taken from the audio), over the built-in voices and CALIBRATION_SENTENCES, per emotion relative to the same
   voice's neutral renderings.
3. The learned conditioning renders only part of what the prior's inputs ask for (a +1 z pitch row raises
   rtvox-small 3.0.0's output log-F0 by about half a speaker std; the decoder follows a range change even
   less), so the knobs are solved through the model's measured response: J = d(features)/d(knobs) from small
   probes on neutral speech, knobs = bounded least squares of J·knobs = data − the model's own effect (each
   feature scaled by its spread over the data's emotions), then one more Newton step on each emotion's
   rendering with those knobs. Duration is exact by construction: data ratio / the model's own.

The prior is what the data shows and the learned conditioning does not do, so it is not counted twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.errors import InputError
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.bundle import CONFIG_NAME, ModelBundle, ModelConfig
from rtvox.models.prosody import EmotionProsody, ProsodyShift
from rtvox.training.data import AcousticSet, frame_log_f0, load_acoustic, speaker_prosody_stats

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
MIN_VOICED_FRAMES = 10  # a clip with fewer voiced frames has no usable pitch statistics
SPEECH_DB = 40.0  # frames within this many dB of the loudest are speech (as the judge's extractor)
FINAL_FRACTION = 1 / 3  # the part of the voiced span whose F0 slope is the final slope (as the judge's)
# Clip features, in this order, compared by difference (the std and the rate as logs, i.e. as ratios); the last
# one (speaking rate) is matched exactly through the duration ratio, the others through the knobs.
FEATURES: tuple[str, ...] = (
    "lf0_mean",
    "lf0_log_std",
    "lf0_p10",
    "lf0_p90",
    "final_slope",
    "energy_db",
    "tilt",
    "log_frames_per_phoneme",
)
# Features the knobs are fitted to (indices into FEATURES). The final slope is reported, not fitted: no knob
# moves it reliably (a pitch ramp over the last third of rtvox-small 3.0.0's input barely moved it, and
# the wrong way).
MATCHED: tuple[int, ...] = (0, 1, 2, 3, 5, 6)
# The knobs solved through the model's response, and the probe step of each.
KNOBS: tuple[str, ...] = ("pitch_shift", "log_pitch_range", "energy_shift", "tilt")
PROBES: tuple[float, ...] = (0.5, 0.25, 0.25, 0.5)
# Bounds on solved knobs: a response too weak to reach the data must not become a wild setting.
KNOB_LIMITS: tuple[tuple[float, float], ...] = (
    (-2.0, 2.0),
    (float(np.log(0.4)), float(np.log(2.5))),
    (-1.5, 1.5),
    (-3.0, 3.0),
)
RATE = FEATURES.index("log_frames_per_phoneme")


@dataclass(frozen=True)
class ProsodyStats:
    """One emotion relative to neutral: the differences of FEATURES (measured, not yet a prior)."""

    values: tuple[float, ...]  # one per FEATURES
    count: int  # speakers (data) or voices (model) it is averaged over

    @classmethod
    def from_vector(cls, v: np.ndarray, count: int) -> ProsodyStats:
        return cls(tuple(float(x) for x in v), count)

    def vector(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    @property
    def duration(self) -> float:
        return float(np.exp(self.values[-1]))

    def to_dict(self) -> dict[str, float]:
        return {**{k: round(v, 4) for k, v in zip(FEATURES, self.values, strict=True)}, "count": self.count}


def _final_slope(times: np.ndarray, lf0: np.ndarray) -> float:
    start = times[0] + (times[-1] - times[0]) * (1 - FINAL_FRACTION)
    keep = times >= start
    if keep.sum() < 3:
        return 0.0
    t = times[keep] - times[keep].mean()
    denom = float(np.sum(t * t))
    return float(np.sum(t * (lf0[keep] - lf0[keep].mean())) / denom) if denom > 0 else 0.0


def clip_features(log_mel: np.ndarray, f0: np.ndarray, phonemes: int) -> np.ndarray | None:
    """log_mel [n_mels, T] (natural log of mel magnitudes), f0 [T] in Hz (0 unvoiced) -> FEATURES, or None with
    fewer than MIN_VOICED_FRAMES voiced speech frames. Energy is the dB of each frame's summed squared mel
    magnitudes over the speech frames, a stand-in for the judge's frame power that packed data can give."""
    energy = 10 * np.log10(np.maximum(np.exp(2 * log_mel).sum(0), 1e-12))  # [T] dB
    speech = energy > energy.max() - SPEECH_DB
    voiced = (f0 > 0) & speech
    if voiced.sum() < MIN_VOICED_FRAMES:
        return None
    lf0 = np.log(f0[voiced].astype(np.float64))
    times = np.flatnonzero(voiced) * HOP_LENGTH / SAMPLE_RATE
    p10, p90 = np.percentile(lf0, [10, 90])
    spectrum = log_mel[:, voiced].mean(1)
    tilt = float(np.polyfit(np.arange(spectrum.shape[0]) / spectrum.shape[0], spectrum, 1)[0])
    rate = np.log(log_mel.shape[1] / max(phonemes, 1))
    std = np.log(max(float(lf0.std()), 1e-4))
    return np.array([lf0.mean(), std, p10, p90, _final_slope(times, lf0), energy[speech].mean(), tilt, rate])


def utterance_features(data: AcousticSet) -> np.ndarray:
    """float64 [U, len(FEATURES)] of every utterance of a packed set; NaN rows for unusable ones."""
    info = data.info
    scale = (info.mel_hi - info.mel_lo) / (info.mel_levels - 1)
    lo, hi = np.log(info.f0_lo), np.log(info.f0_hi)
    out = np.full((len(data), len(FEATURES)), np.nan)
    for u in range(len(data)):
        a, b = data.mel_off[u], data.mel_off[u + 1]
        codes = data.f0[a:b]
        f0 = np.where(codes > 0, np.exp(lo + (codes.astype(np.float64) - 1) / 254 * (hi - lo)), 0.0)
        log_mel = data.mel[a:b].T.astype(np.float64) * scale + info.mel_lo
        row = clip_features(log_mel, f0, int(data.ph_off[u + 1] - data.ph_off[u]))
        if row is not None:
            out[u] = row
    return out


def data_prosody(data: AcousticSet, min_clips: int = 3) -> dict[str, ProsodyStats]:
    """Emotion -> its clip features relative to neutral in `data`, averaged over speakers with >= min_clips usable
    clips of that emotion and of neutral. Emotions no speaker qualifies for are left out."""
    rows = utterance_features(data)
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
                relative.append(rows[emo].mean(0) - rows[neu].mean(0))
        if relative:
            out[name] = ProsodyStats.from_vector(np.mean(relative, axis=0), len(relative))
    return out


# ---------------------------------------------------------------------------------------------- the model
def _shift(knobs: np.ndarray, duration: float = 1.0) -> ProsodyShift:
    return ProsodyShift(
        pitch_shift=float(knobs[0]),
        pitch_range=float(np.exp(knobs[1])),
        energy_shift=float(knobs[2]),
        duration=duration,
        tilt=float(knobs[3]),
    )


class ModelRenderer:
    """Renders the calibration sentences through a Synthesizer's own pipeline with a given emotion label and prior
    entry, and measures FEATURES on the audio (per voice, averaged over sentences)."""

    def __init__(self, synth: Synthesizer, sentences: Sequence[str], voices: Sequence[str]) -> None:
        from rtvox.audio.mel import MelSpectrogram

        if not isinstance(synth.bundle, ModelBundle):
            raise InputError("the emotion prosody prior is for the FastSpeech2 family; this model is autoregressive")
        self.synth = synth
        self.sentences = tuple(sentences)
        self.voices = tuple(voices)
        self.mel = MelSpectrogram()

    def features(self, emotion: str, shift: ProsodyShift) -> np.ndarray:
        """[voices, len(FEATURES)]: each voice's mean over the sentences of `emotion` rendered with `shift` (the
        emotion's prior entry at α = 1; a ProsodyShift() renders the learned conditioning alone)."""
        from rtvox.audio.pitch import frame_f0
        from rtvox.runtime.steps import ChunkJob
        from rtvox.runtime.types import SynthesisRequest

        out = []
        for voice in self.voices:
            rows = []
            for text in self.sentences:
                prepared = self.synth.prepare(SynthesisRequest(text=text, voice=voice, emotion=emotion))
                prepared = dataclasses.replace(prepared, prosody=shift.row(1.0), tilt=shift.tilt)
                chunks = self.synth.run_step([ChunkJob(prepared, i) for i in range(len(prepared.chunks))])
                audio = np.concatenate([c.audio for c in chunks])
                n_frames = audio.shape[0] // HOP_LENGTH
                with torch.inference_mode():
                    log_mel = self.mel(torch.from_numpy(audio[: n_frames * HOP_LENGTH])[None])[0].double().numpy()
                row = clip_features(log_mel, frame_f0(audio, n_frames), prepared.phoneme_count)
                if row is not None:
                    rows.append(row)
            if not rows:
                raise InputError(f"voice {voice!r} rendered no clip with enough voiced frames to calibrate on")
            out.append(np.mean(rows, axis=0))
        return np.stack(out)


def solve_bounded(response: np.ndarray, want: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Least-squares knobs x of response @ x = want within [lo, hi]: a knob that leaves its bounds is fixed there
    and the others are solved again, so they make up what it cannot do."""
    x = np.zeros(response.shape[1])
    free = np.ones(response.shape[1], bool)
    while free.any():
        rest = want - response[:, ~free] @ x[~free]
        x[free] = np.linalg.lstsq(response[:, free], rest, rcond=None)[0]
        out = free & ((x < lo) | (x > hi))
        if not out.any():
            break
        x[out] = np.clip(x[out], lo[out], hi[out])
        free &= ~out
    return x


def calibrate(renderer: ModelRenderer, data: dict[str, ProsodyStats]) -> tuple[dict[str, ProsodyShift], dict[str, Any]]:
    """Solve each emotion's knobs so the model's renderings move like the data (see the module doc). Returns the
    prior entries and the measurements behind them (the model's own effect, the response matrix, the result)."""
    if not data:  # no emotional speech in the data: the identity prior, nothing to render
        return {}, {}
    neutral = renderer.features("neutral", ProsodyShift())  # [V, F]
    k, m = len(KNOBS), list(MATCHED)
    # Each feature in units of its spread over the data's emotions, so dB and log-Hz weigh alike.
    scale = np.std([t.vector()[m] for t in data.values()], axis=0) + 1e-3 if len(data) > 1 else np.ones(len(m))
    response = np.zeros((len(m), k))  # d(feature i)/d(knob j), scaled
    for j, step in enumerate(PROBES):
        knobs = np.zeros(k)
        knobs[j] = step
        moved = renderer.features("neutral", _shift(knobs))
        response[:, j] = (moved - neutral).mean(0)[m] / step / scale
    lo, hi = np.array(KNOB_LIMITS).T
    prior: dict[str, ProsodyShift] = {}
    own: dict[str, ProsodyStats] = {}
    result: dict[str, ProsodyStats] = {}
    for emotion, target in data.items():
        learned = (renderer.features(emotion, ProsodyShift()) - neutral).mean(0)
        own[emotion] = ProsodyStats.from_vector(learned, len(renderer.voices))
        want = target.vector()
        duration = float(np.exp(want[RATE] - learned[RATE]))
        knobs = solve_bounded(response, (want - learned)[m] / scale, lo, hi)
        got = (renderer.features(emotion, _shift(knobs, duration)) - neutral).mean(0)
        knobs = solve_bounded(response, (want - got)[m] / scale + response @ knobs, lo, hi)  # one Newton step
        prior[emotion] = _shift(knobs, duration)
        final = (renderer.features(emotion, prior[emotion]) - neutral).mean(0)
        result[emotion] = ProsodyStats.from_vector(final, len(renderer.voices))
    report = {
        "model_prosody": {e: s.to_dict() for e, s in own.items()},
        "with_prior": {e: s.to_dict() for e, s in result.items()},
        "response": {name: [round(float(x), 4) for x in response[:, j] * scale] for j, name in enumerate(KNOBS)},
    }
    return prior, report


def compute_prior(
    data: AcousticSet,
    synth: Synthesizer,
    *,
    source: dict[str, Any] | None = None,
    min_clips: int = 3,
    voices: Sequence[str] | None = None,
    sentences: Sequence[str] = CALIBRATION_SENTENCES,
) -> EmotionProsody:
    """The calibrated prior of `synth`'s model from `data`, with its provenance and the measurements."""
    measured = data_prosody(data, min_clips=min_clips)
    voices = tuple(voices or synth.voices.builtin_names)
    prior, report = calibrate(ModelRenderer(synth, sentences, voices), measured)
    return EmotionProsody(
        prior,
        {
            **(source or {}),
            "method": "knobs solved through the model's measured response to match the data's per-emotion "
            "clip features relative to neutral; rtvox.training.prosody_prior",
            "model_version": synth.bundle.config.version,
            "pitch_bounds": synth.bundle.acoustic.variance.pitch_bounds
            if isinstance(synth.bundle, ModelBundle)
            else None,
            "utterances": len(data),
            "min_clips": min_clips,
            "calibration": {"voices": list(voices), "sentences": len(sentences)},
            "data_prosody": {e: s.to_dict() for e, s in measured.items()},
            **report,
        },
    )


# The pitch bound: per emotion the PITCH_PERCENTILE-th lowest and highest voiced frame pitch (speaker z, as the
# trainer's targets), over the emotions with at least PITCH_MIN_FRAMES voiced frames (~11 s); the widest of them.
PITCH_PERCENTILE = 1.0
PITCH_MIN_FRAMES = 1000


def pitch_bounds(data: AcousticSet, min_frames: int = PITCH_MIN_FRAMES) -> tuple[float, float] | None:
    """(low, high) speaker z-scores of the pitch the data's speech spans: per emotion the 1st and 99th percentile
    of voiced frames normalized by their speaker's statistics (as the acoustic trainer's pitch targets), then the
    lowest low and highest high over the emotions. The tails beyond are mostly tracker octave errors (maxima of
    8-14 z), so the percentiles, not the extremes. None (no bound) when no emotion has `min_frames` voiced frames:
    too little data to say where the range ends."""
    stats = speaker_prosody_stats(data)
    log_f0, voiced = frame_log_f0(data)
    lengths = np.diff(data.mel_off)
    speaker, emotion = np.repeat(data.speaker, lengths), np.repeat(data.emotion, lengths)
    z = (log_f0 - stats[speaker, 0]) / stats[speaker, 1]
    lows, highs = [], []
    for e in np.unique(data.emotion):
        values = z[voiced & (emotion == e)]
        if values.size >= min_frames:
            low, high = np.percentile(values, [PITCH_PERCENTILE, 100 - PITCH_PERCENTILE])
            lows.append(low)
            highs.append(high)
    if not lows:
        return None
    return round(float(min(lows)), 2), round(float(max(highs)), 2)


def update_config(model_dir: Path, change: Callable[[ModelConfig], ModelConfig]) -> ModelConfig:
    """MODEL_DIR/config.json rewritten (atomically) as `change` makes it; every other key stays as it was."""
    path = model_dir / CONFIG_NAME
    config = change(ModelConfig.from_dict(json.loads(path.read_text(encoding="utf-8"))))
    atomic_write_bytes(path, (json.dumps(config.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return config


def write_pitch_bounds(model_dir: Path, bounds: tuple[float, float] | None) -> ModelConfig:
    """Set the acoustic model's `pitch_bounds` in MODEL_DIR/config.json (atomically)."""
    return update_config(
        model_dir, lambda c: dataclasses.replace(c, acoustic=dataclasses.replace(c.acoustic, pitch_bounds=bounds))
    )


def write_prior(model_dir: Path, prior: EmotionProsody) -> ModelConfig:
    """Set `emotion_prosody` in MODEL_DIR/config.json (atomically); every other key stays as it was."""
    return update_config(model_dir, lambda c: dataclasses.replace(c, emotion_prosody=prior))


def prosody_prior_for(model_dir: Path, data: AcousticSet, data_dir: Path) -> EmotionProsody:
    """Bound the model's pitch to the range of `data` (loaded from `data_dir`), then compute its prior under that
    bound from the same data and write both into `model_dir`'s config."""
    from rtvox.runtime.synthesizer import Synthesizer

    write_pitch_bounds(model_dir, pitch_bounds(data))
    synth = Synthesizer(model_dir, device="cpu")  # a prior already in config.json is not used: see ModelRenderer
    shards = sorted(p.name for p in data_dir.glob("acoustic-*.npz.xz"))
    prior = compute_prior(data, synth, source={"data": str(data_dir), "shards": shards})
    write_prior(model_dir, prior)
    return prior


def prosody_prior_command(data_dir: Path, model_dir: Path) -> EmotionProsody:
    """`rtvox train prosody-prior`: load the packed data, compute, write."""
    return prosody_prior_for(model_dir, load_acoustic(data_dir), data_dir)
