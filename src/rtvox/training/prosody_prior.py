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

Two feature spaces (`FeatureSpace`): PACKED measures the data from packed log-mel and F0 and the renderings from
their log-mel (energy from summed mel power); WAVEFORM measures teacher-corpus wavs (training speakers only, a
seeded sample) and the renderings alike from the waveform, with the prosody extractor the emotion judge reads
(frame power for energy; speaking rate as seconds per syllable). The mel stand-in understates the teachers'
energy and tilt shifts (angry: +1.46 dB against +2.36 dB from the waveform), so a prior solved in PACKED space
renders emotions weaker than the data's speech; WAVEFORM needs the corpus wavs, PACKED only the packed shards.
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
class FeatureSpace:
    """Which clip features the prior is solved in: their names, the ones the knobs fit, and the (log) rate the
    duration ratio matches exactly. Every feature is compared by difference (spreads and rates are logs)."""

    name: str
    features: tuple[str, ...]
    matched: tuple[int, ...]
    rate: int


PACKED = FeatureSpace("packed", FEATURES, MATCHED, RATE)
# The emotion judge's features (rtvox.eval.prosody.FEATURES) with the two spreads as logs, so that differences are
# the judge's log ratios. Fitted: log-F0 mean, log spread, 10th/90th percentiles, energy, tilt; the final slope,
# the energy spread and the voiced ratio are reported only; the rate (log seconds per syllable) is exact.
WAVEFORM_FEATURES: tuple[str, ...] = (
    "lf0_mean",
    "lf0_log_std",
    "lf0_p10",
    "lf0_p90",
    "final_slope",
    "energy_mean",
    "energy_log_std",
    "voiced_ratio",
    "sec_per_syllable",
    "tilt",
)
WAVEFORM = FeatureSpace("waveform", WAVEFORM_FEATURES, (0, 1, 2, 3, 5, 9), 8)
_LOG_COLUMNS = (1, 6)  # the judge's lf0_std and energy_std, taken as logs in WAVEFORM space


@dataclass(frozen=True)
class ProsodyStats:
    """One emotion relative to neutral: the differences of a space's features (measured, not yet a prior)."""

    values: tuple[float, ...]  # one per space.features
    count: int  # speakers (data) or voices (model) it is averaged over
    space: FeatureSpace = PACKED

    def __post_init__(self) -> None:
        if len(self.values) != len(self.space.features):
            raise ValueError(f"{len(self.values)} values for the {len(self.space.features)} {self.space.name} features")

    @classmethod
    def from_vector(cls, v: np.ndarray, count: int, space: FeatureSpace = PACKED) -> ProsodyStats:
        return cls(tuple(float(x) for x in v), count, space)

    def vector(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    @property
    def duration(self) -> float:
        """The data's length ratio to neutral (exp of the log rate difference)."""
        return float(np.exp(self.values[self.space.rate]))

    def to_dict(self) -> dict[str, float]:
        return {**{k: round(v, 4) for k, v in zip(self.space.features, self.values, strict=True)}, "count": self.count}


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


def _relative_to_neutral(
    rows: np.ndarray, speakers: np.ndarray, emotions: np.ndarray, min_clips: int, space: FeatureSpace
) -> dict[str, ProsodyStats]:
    """rows [N, F] (NaN rows unusable), one speaker and emotion label per row -> per emotion, the mean over
    speakers with >= min_clips usable clips of it and of neutral of (its mean - the speaker's neutral mean)."""
    usable = ~np.isnan(rows).any(axis=1)
    out: dict[str, ProsodyStats] = {}
    for name in dict.fromkeys(emotions.tolist()):
        if name == "neutral":
            continue
        relative = []
        for speaker in np.unique(speakers):
            mine = usable & (speakers == speaker)
            emo, neu = mine & (emotions == name), mine & (emotions == "neutral")
            if emo.sum() >= min_clips and neu.sum() >= min_clips:
                relative.append(rows[emo].mean(0) - rows[neu].mean(0))
        if relative:
            out[name] = ProsodyStats.from_vector(np.mean(relative, axis=0), len(relative), space)
    return out


def data_prosody(data: AcousticSet, min_clips: int = 3) -> dict[str, ProsodyStats]:
    """Emotion -> its clip features relative to neutral in `data` (PACKED space), averaged over speakers with >=
    min_clips usable clips of that emotion and of neutral. Emotions no speaker qualifies for are left out."""
    labels = np.asarray(data.info.emotions)[data.emotion]
    measured = _relative_to_neutral(utterance_features(data), data.speaker, labels, min_clips, PACKED)
    return {name: measured[name] for name in data.info.emotions if name in measured}


def waveform_row(features: np.ndarray) -> np.ndarray:
    """The judge extractor's absolute features [..., 10] in WAVEFORM form: the two spreads as logs."""
    out = np.array(features, dtype=np.float64)
    out[..., list(_LOG_COLUMNS)] = np.log(np.maximum(out[..., list(_LOG_COLUMNS)], 1e-6))
    return out


@dataclass(frozen=True)
class CorpusSample:
    """How many teacher clips per training speaker the WAVEFORM targets are measured on (seeded)."""

    max_neutral: int = 12
    max_other: int = 8
    seed: int = 0
    jobs: int = 2


def corpus_prosody(
    corpora: Sequence[Path], sample: CorpusSample = CorpusSample(), min_clips: int = 3
) -> tuple[dict[str, ProsodyStats], int]:
    """Emotion -> WAVEFORM features relative to neutral of teacher-corpus clips (recipes/corpus folders: a
    manifest.jsonl beside the wavs), measured as the emotion judge measures, on a seeded sample of the training
    speakers' clips (the judge's held-out teacher speakers are never read), averaged over speakers as
    data_prosody. Also returns how many clips were measured."""
    from rtvox.eval.judge_data import extract_corpus_features

    rows, speakers, emotions = [], [], []
    for corpus in corpora:
        if not (corpus / "manifest.jsonl").is_file():
            raise InputError(f"{corpus} is not a corpus folder: no manifest.jsonl (build one with recipes/corpus)")
        feats = extract_corpus_features(
            corpus,
            max_neutral=sample.max_neutral,
            max_other=sample.max_other,
            seed=sample.seed,
            jobs=sample.jobs,
            include_heldout=False,
        )
        rows.append(waveform_row(feats.features))
        speakers += feats.speakers
        emotions += feats.emotions
    if not speakers:
        raise InputError(f"no usable training clips in {', '.join(map(str, corpora))}")
    measured = _relative_to_neutral(
        np.concatenate(rows), np.asarray(speakers), np.asarray(emotions), min_clips, WAVEFORM
    )
    return measured, len(speakers)


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

    def __init__(
        self, synth: Synthesizer, sentences: Sequence[str], voices: Sequence[str], space: FeatureSpace = PACKED
    ) -> None:
        from rtvox.audio.mel import MelSpectrogram
        from rtvox.eval.prosody import ProsodyExtractor

        if not isinstance(synth.bundle, ModelBundle):
            raise InputError("the emotion prosody prior is for the FastSpeech2 family; this model is autoregressive")
        self.synth = synth
        self.sentences = tuple(sentences)
        self.voices = tuple(voices)
        self.space = space
        self.mel = MelSpectrogram()
        self.extract = ProsodyExtractor()

    def subset(self, voices: Sequence[str]) -> ModelRenderer:
        """The same renderer over other voices (for a voice's own calibration)."""
        return ModelRenderer(self.synth, self.sentences, voices, self.space)

    def measure(self, audio: np.ndarray, text: str, phonemes: int) -> np.ndarray | None:
        """One rendering's features in this renderer's space; None when it has too little voiced speech."""
        from rtvox.audio.pitch import frame_f0

        if self.space is WAVEFORM:
            try:
                return waveform_row(self.extract(audio, SAMPLE_RATE, text))
            except ValueError:  # too short after trimming
                return None
        n_frames = audio.shape[0] // HOP_LENGTH
        with torch.inference_mode():
            log_mel = self.mel(torch.from_numpy(audio[: n_frames * HOP_LENGTH])[None])[0].double().numpy()
        return clip_features(log_mel, frame_f0(audio, n_frames), phonemes)

    def features(self, emotion: str, shift: ProsodyShift) -> np.ndarray:
        """[voices, len(FEATURES)]: each voice's mean over the sentences of `emotion` rendered with `shift` (the
        emotion's prior entry at α = 1; a ProsodyShift() renders the learned conditioning alone)."""
        from rtvox.runtime.steps import ChunkJob
        from rtvox.runtime.types import SynthesisRequest

        out = []
        for voice in self.voices:
            rows = []
            for text in self.sentences:
                prepared = self.synth.prepare(SynthesisRequest(text=text, voice=voice, emotion=emotion))
                prepared = dataclasses.replace(prepared, prosody=shift.row(1.0), tilt=shift.tilt)
                chunks = self.synth.run_step([ChunkJob(prepared, i) for i in range(len(prepared.chunks))])
                row = self.measure(np.concatenate([c.audio for c in chunks]), text, prepared.phoneme_count)
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
    space = next(iter(data.values())).space
    neutral = renderer.features("neutral", ProsodyShift())  # [V, F]
    k, m = len(KNOBS), list(space.matched)
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
        own[emotion] = ProsodyStats.from_vector(learned, len(renderer.voices), space)
        want = target.vector()
        duration = float(np.exp(want[space.rate] - learned[space.rate]))
        knobs = solve_bounded(response, (want - learned)[m] / scale, lo, hi)
        got = (renderer.features(emotion, _shift(knobs, duration)) - neutral).mean(0)
        knobs = solve_bounded(response, (want - got)[m] / scale + response @ knobs, lo, hi)  # one Newton step
        prior[emotion] = _shift(knobs, duration)
        final = (renderer.features(emotion, prior[emotion]) - neutral).mean(0)
        result[emotion] = ProsodyStats.from_vector(final, len(renderer.voices), space)
    report = {
        "model_prosody": {e: s.to_dict() for e, s in own.items()},
        "with_prior": {e: s.to_dict() for e, s in result.items()},
        "response": {name: [round(float(x), 4) for x in response[:, j] * scale] for j, name in enumerate(KNOBS)},
    }
    return prior, report


def calibrate_voices(
    renderer: ModelRenderer, data: dict[str, ProsodyStats]
) -> tuple[dict[str, dict[str, ProsodyShift]], dict[str, Any]]:
    """Each voice of `renderer` calibrated on its own (its own response and learned effect): voice -> prior
    entries, and voice -> what its renderings do with them (the matched features)."""
    entries: dict[str, dict[str, ProsodyShift]] = {}
    reached: dict[str, Any] = {}
    for voice in renderer.voices:
        entries[voice], report = calibrate(renderer.subset((voice,)), data)
        reached[voice] = report.get("with_prior", {})
    return entries, reached


def prior_from_stats(
    measured: dict[str, ProsodyStats],
    synth: Synthesizer,
    *,
    source: dict[str, Any],
    voices: Sequence[str] | None = None,
    sentences: Sequence[str] = CALIBRATION_SENTENCES,
    per_voice: bool = False,
) -> EmotionProsody:
    """The prior of `synth`'s model calibrated against data measurements (one space), with its provenance; with
    `per_voice`, also each built-in voice's own entries (EmotionProsody.voices)."""
    space = next(iter(measured.values())).space if measured else PACKED
    voices = tuple(voices or synth.voices.builtin_names)
    renderer = ModelRenderer(synth, sentences, voices, space)
    prior, report = calibrate(renderer, measured)
    own: dict[str, dict[str, ProsodyShift]] = {}
    if per_voice and measured:
        own, reached = calibrate_voices(renderer, measured)
        report["voices_with_prior"] = reached
    return EmotionProsody(
        prior,
        {
            **source,
            "method": "knobs solved through the model's measured response to match the data's per-emotion "
            "clip features relative to neutral; rtvox.training.prosody_prior",
            "feature_space": space.name,
            "model_version": synth.bundle.config.version,
            "pitch_bounds": synth.bundle.acoustic.variance.pitch_bounds
            if isinstance(synth.bundle, ModelBundle)
            else None,
            "calibration": {"voices": list(voices), "sentences": len(sentences)},
            "data_prosody": {e: s.to_dict() for e, s in measured.items()},
            **report,
        },
        own,
    )


def compute_prior(
    data: AcousticSet,
    synth: Synthesizer,
    *,
    source: dict[str, Any] | None = None,
    min_clips: int = 3,
    voices: Sequence[str] | None = None,
    sentences: Sequence[str] = CALIBRATION_SENTENCES,
    per_voice: bool = False,
) -> EmotionProsody:
    """The calibrated prior of `synth`'s model from packed `data` (PACKED space)."""
    measured = data_prosody(data, min_clips=min_clips)
    source = {**(source or {}), "utterances": len(data), "min_clips": min_clips}
    return prior_from_stats(measured, synth, source=source, voices=voices, sentences=sentences, per_voice=per_voice)


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


def _update_config(model_dir: Path, change: Callable[[ModelConfig], ModelConfig]) -> ModelConfig:
    """MODEL_DIR/config.json rewritten (atomically) as `change` makes it; every other key stays as it was."""
    path = model_dir / CONFIG_NAME
    config = change(ModelConfig.from_dict(json.loads(path.read_text(encoding="utf-8"))))
    atomic_write_bytes(path, (json.dumps(config.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return config


def write_pitch_bounds(model_dir: Path, bounds: tuple[float, float] | None) -> ModelConfig:
    """Set the acoustic model's `pitch_bounds` in MODEL_DIR/config.json (atomically)."""
    return _update_config(
        model_dir, lambda c: dataclasses.replace(c, acoustic=dataclasses.replace(c.acoustic, pitch_bounds=bounds))
    )


def write_prior(model_dir: Path, prior: EmotionProsody) -> ModelConfig:
    """Set `emotion_prosody` in MODEL_DIR/config.json (atomically); every other key stays as it was."""
    return _update_config(model_dir, lambda c: dataclasses.replace(c, emotion_prosody=prior))


def prosody_prior_for(model_dir: Path, data: AcousticSet, data_dir: Path, per_voice: bool = False) -> EmotionProsody:
    """Bound the model's pitch to the range of `data` (loaded from `data_dir`), then compute its prior under that
    bound from the same data and write both into `model_dir`'s config."""
    from rtvox.runtime.synthesizer import Synthesizer

    write_pitch_bounds(model_dir, pitch_bounds(data))
    synth = Synthesizer(model_dir, device="cpu")  # a prior already in config.json is not used: see ModelRenderer
    shards = sorted(p.name for p in data_dir.glob("acoustic-*.npz.xz"))
    prior = compute_prior(data, synth, source={"data": str(data_dir), "shards": shards}, per_voice=per_voice)
    write_prior(model_dir, prior)
    return prior


def prosody_prior_command(
    model_dir: Path,
    data_dir: Path | None = None,
    corpora: Sequence[Path] = (),
    sample: CorpusSample = CorpusSample(),
    per_voice: bool = False,
) -> EmotionProsody:
    """`rtvox train prosody-prior`. With packed data only: bound the pitch to its range, then solve the prior in
    PACKED space from it. With corpus folders: targets in WAVEFORM space from their wavs (the pitch bound is
    recomputed when packed data is given too, else kept as config.json has it)."""
    from rtvox.runtime.synthesizer import Synthesizer

    if data_dir is None and not corpora:
        raise InputError("give the packed training data (--data) or teacher corpus folders (--corpus), or both")
    if not corpora:
        assert data_dir is not None
        return prosody_prior_for(model_dir, load_acoustic(data_dir), data_dir, per_voice=per_voice)
    if data_dir is not None:
        write_pitch_bounds(model_dir, pitch_bounds(load_acoustic(data_dir)))
    measured, clips = corpus_prosody(corpora, sample)
    synth = Synthesizer(model_dir, device="cpu")
    source = {
        "corpora": [str(c) for c in corpora],
        "clips": clips,
        "sampling": {"max_neutral": sample.max_neutral, "max_other": sample.max_other, "seed": sample.seed},
        "pitch_bounds_from": str(data_dir) if data_dir is not None else "kept",
    }
    prior = prior_from_stats(measured, synth, source=source, per_voice=per_voice)
    write_prior(model_dir, prior)
    return prior
