"""Utterance-level prosody features for the emotion judge, and their form relative to a neutral reference.

The judge must hear the emotion, not the voice: a high-pitched voice is not "happy". So every feature is
measured against the same speaker's neutral speech — for corpus clips the mean of that speaker's neutral
utterances, for a model's output the same voice's neutral renderings of the same sentences. Level features
(log-F0, energy in dB, seconds per syllable, spectral tilt, voiced ratio, final F0 slope) become differences;
spread features (log-F0 and energy standard deviations) become log ratios.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from rtvox.audio.decode import resample
from rtvox.audio.loudness import trim_silence
from rtvox.audio.mel import MelSpectrogram
from rtvox.audio.pitch import frame_f0
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.metrics import normalize_for_scoring
from rtvox.text.script import is_han

# Absolute features of one utterance, in this order.
FEATURES: tuple[str, ...] = (
    "lf0_mean",  # mean log F0 over voiced frames (log Hz)
    "lf0_std",  # standard deviation of log F0
    "lf0_p10",  # 10th percentile of log F0
    "lf0_p90",  # 90th percentile of log F0
    "final_slope",  # slope of log F0 over the last third of the voiced span (per second)
    "energy_mean",  # mean frame energy over speech frames (dB)
    "energy_std",  # its standard deviation (dB)
    "voiced_ratio",  # voiced frames / speech frames
    "sec_per_syllable",  # log of speech seconds per syllable (a speaking-rate proxy)
    "tilt",  # slope of the mean log-mel over the 80 bands, voiced frames (nats per band x 80)
)
# Features compared by log ratio to the reference; the others by difference.
RATIO_FEATURES = frozenset({"lf0_std", "energy_std"})
SPEECH_DB = 40.0  # frames within this many dB of the loudest frame are speech
FINAL_FRACTION = 1 / 3  # the part of the voiced span whose F0 slope is the final slope
MIN_VOICED_FRAMES = 5
_VOWELS = re.compile(r"[aeiouy]+")


def syllable_count(text: str) -> int:
    """Syllables of a sentence as read: one per Han character, one per vowel group of a Latin word (≥ 1)."""
    count = 0
    for token in normalize_for_scoring(text).split():
        if len(token) == 1 and is_han(token):
            count += 1
        else:
            count += max(1, len(_VOWELS.findall(token)))
    return max(1, count)


def _final_slope(times: np.ndarray, lf0: np.ndarray) -> float:
    """Least-squares slope of log F0 against time over the last third of the voiced span."""
    start = times[0] + (times[-1] - times[0]) * (1 - FINAL_FRACTION)
    keep = times >= start
    if keep.sum() < 3:
        return 0.0
    t, y = times[keep], lf0[keep]
    t = t - t.mean()
    denom = float(np.sum(t * t))
    return float(np.sum(t * (y - y.mean())) / denom) if denom > 0 else 0.0


class ProsodyExtractor:
    """Measures FEATURES on a clip. Owns the mel front end used for the spectral tilt (CPU, fp32)."""

    def __init__(self) -> None:
        self._mel = MelSpectrogram()

    def __call__(self, wav: np.ndarray, sample_rate: int, text: str) -> np.ndarray:
        """float64 [len(FEATURES)] for a mono clip at any rate and the sentence it speaks."""
        audio = np.asarray(wav, dtype=np.float32)
        if sample_rate != SAMPLE_RATE:
            audio = resample(audio, sample_rate, SAMPLE_RATE)
        audio = trim_silence(audio, SAMPLE_RATE)
        n_frames = audio.shape[0] // HOP_LENGTH
        if n_frames < MIN_VOICED_FRAMES * 2:
            raise ValueError(f"clip too short for prosody features ({audio.shape[0]} samples after trimming)")
        audio = audio[: n_frames * HOP_LENGTH]
        f0 = frame_f0(audio, n_frames)
        power = np.square(audio.astype(np.float64)).reshape(n_frames, HOP_LENGTH).mean(1)
        energy = 10 * np.log10(np.maximum(power, 1e-12))
        speech = energy > energy.max() - SPEECH_DB
        voiced = (f0 > 0) & speech
        with torch.inference_mode():
            mel = self._mel(torch.from_numpy(audio)[None])[0].double().numpy()  # [n_mels, n_frames]
        frames = min(mel.shape[1], n_frames)
        tilt_frames = voiced[:frames] if voiced[:frames].sum() >= MIN_VOICED_FRAMES else speech[:frames]
        spectrum = mel[:, :frames][:, tilt_frames].mean(1)  # [n_mels]
        bands = np.arange(spectrum.shape[0], dtype=np.float64) / spectrum.shape[0]
        tilt = float(np.polyfit(bands, spectrum, 1)[0])
        speech_seconds = speech.sum() * HOP_LENGTH / SAMPLE_RATE
        sec_per_syllable = float(np.log(speech_seconds / syllable_count(text)))
        if voiced.sum() >= MIN_VOICED_FRAMES:
            lf0 = np.log(f0[voiced].astype(np.float64))
            times = np.flatnonzero(voiced) * HOP_LENGTH / SAMPLE_RATE
            p10, p90 = np.percentile(lf0, [10, 90])
            pitch = [lf0.mean(), lf0.std(), p10, p90, _final_slope(times, lf0)]
        else:  # no pitch found: neutral-looking values rather than a failure
            pitch = [np.log(150.0), 0.0, np.log(150.0), np.log(150.0), 0.0]
        e = energy[speech]
        values = [*pitch, e.mean(), e.std(), voiced.sum() / max(1, speech.sum()), sec_per_syllable, tilt]
        return np.asarray(values, dtype=np.float64)


def relative(features: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Features of clips [..., F] relative to a neutral reference [F] (differences; log ratios for spreads)."""
    features = np.asarray(features, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    out = features - reference
    for i, name in enumerate(FEATURES):
        if name in RATIO_FEATURES:
            out[..., i] = np.log(np.maximum(features[..., i], 1e-6) / max(float(reference[i]), 1e-6))
    return out


@dataclass(frozen=True)
class NeutralReference:
    """Mean absolute features of one speaker's neutral utterances (the baseline its other clips are read against)."""

    speaker: str
    mean: np.ndarray  # float64 [len(FEATURES)]
    count: int  # how many neutral utterances were averaged

    @classmethod
    def from_features(cls, speaker: str, rows: np.ndarray) -> NeutralReference:
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        if rows.shape[0] == 0:
            raise ValueError(f"speaker {speaker!r} has no neutral utterance to serve as reference")
        return cls(speaker=speaker, mean=rows.mean(0), count=int(rows.shape[0]))
