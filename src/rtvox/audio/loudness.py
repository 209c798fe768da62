"""Levels: integrated loudness (ITU-R BS.1770), RMS and peak, normalization, and silence trimming.

References arrive at any level; the models want them at one. `normalize_loudness` brings speech to a target
loudness in LUFS (what listeners perceive, unlike peak), and `peak_limit` then makes sure the gain did not
push samples past full scale. Both only apply one gain to the whole clip, so the waveform's shape, which the
speaker encoder looks at, is unchanged.

`trim_silence` cuts leading and trailing silence by short-time energy, with no VAD model: frames more than
`top_db` below the loudest frame are silence. A reference clip's length limits are about its speech, so the
silence around it must not count. Internal pauses are kept, since they belong to the speaker's rhythm.
"""

from __future__ import annotations

import warnings

import numpy as np
import pyloudnorm

DEFAULT_TARGET_LUFS = -20.0
DEFAULT_PEAK_CEILING_DB = -1.0
# Raising a near-silent clip by more than this only amplifies its noise floor.
DEFAULT_MAX_GAIN_DB = 30.0
# BS.1770 gates on 400 ms blocks; shorter clips have no integrated loudness.
_LOUDNESS_BLOCK_SECONDS = 0.4
# Anything quieter is treated as digital silence and left alone.
_DIGITAL_SILENCE_DB = -100.0

# Silence trimming: frames this far below the loudest one are silence.
DEFAULT_TOP_DB = 40.0
# 25 ms frames every 10 ms resolve syllable onsets; the constants are in seconds so any rate works.
FRAME_SECONDS = 0.025
HOP_SECONDS = 0.010
# Audio kept on either side of the detected speech so soft onsets and decays are not clipped off.
DEFAULT_MARGIN_SECONDS = 0.05
# Frames below this absolute level are silence even when the whole clip is that quiet.
_TRIM_FLOOR_DB = -90.0


def db_to_gain(db: float) -> float:
    return float(10.0 ** (db / 20.0))


def rms_dbfs(wav: np.ndarray) -> float:
    """Root-mean-square level in dB relative to full scale; -inf for silence or an empty clip."""
    wav = np.asarray(wav, dtype=np.float64)
    if wav.size == 0:
        return float("-inf")
    power = float(np.mean(np.square(wav)))
    return 10.0 * float(np.log10(power)) if power > 0.0 else float("-inf")


def peak_dbfs(wav: np.ndarray) -> float:
    """Largest absolute sample in dB relative to full scale; -inf for silence or an empty clip."""
    wav = np.asarray(wav)
    peak = float(np.max(np.abs(wav))) if wav.size else 0.0
    return 20.0 * float(np.log10(peak)) if peak > 0.0 else float("-inf")


def integrated_loudness(wav: np.ndarray, sr: int) -> float | None:
    """BS.1770 integrated loudness in LUFS, or None when the clip is shorter than one gating block or
    entirely below the absolute gate (silence)."""
    wav = np.asarray(wav, dtype=np.float64)
    if wav.shape[0] < int(np.ceil(_LOUDNESS_BLOCK_SECONDS * sr)):
        return None
    with warnings.catch_warnings():
        # pyloudnorm warns (rather than fails) on clipped input; clipping is reported elsewhere.
        warnings.simplefilter("ignore")
        lufs = float(pyloudnorm.Meter(sr).integrated_loudness(wav))
    return lufs if np.isfinite(lufs) else None


def normalize_loudness(
    wav: np.ndarray,
    sr: int,
    target_lufs: float = DEFAULT_TARGET_LUFS,
    *,
    max_gain_db: float = DEFAULT_MAX_GAIN_DB,
    peak_ceiling_db: float = DEFAULT_PEAK_CEILING_DB,
) -> np.ndarray:
    """Scale `wav` so its integrated loudness is `target_lufs`, then keep its peak under `peak_ceiling_db`.

    Clips shorter than a 400 ms gating block have no integrated loudness; for them the RMS level stands in
    for LUFS (close for speech, whose energy sits where K-weighting is nearly flat). Silence is returned
    unchanged. Gain is capped at `max_gain_db` so background hiss is never raised into noise.
    """
    wav = np.asarray(wav, dtype=np.float32)
    if wav.size == 0 or peak_dbfs(wav) <= _DIGITAL_SILENCE_DB:
        return wav.copy()
    current = integrated_loudness(wav, sr)
    if current is None:
        current = rms_dbfs(wav)
    gain_db = min(target_lufs - current, max_gain_db)
    return peak_limit(wav * np.float32(db_to_gain(gain_db)), peak_ceiling_db)


def peak_limit(wav: np.ndarray, ceiling_db: float = DEFAULT_PEAK_CEILING_DB) -> np.ndarray:
    """Scale the whole clip down so no sample exceeds `ceiling_db` dBFS; never raises the level.

    A single gain rather than a dynamic limiter: it cannot add distortion or pumping, at the price of a
    quieter result when one transient sticks out.
    """
    wav = np.asarray(wav, dtype=np.float32)
    ceiling = db_to_gain(ceiling_db)
    peak = float(np.max(np.abs(wav))) if wav.size else 0.0
    if peak <= ceiling:
        return wav.copy()
    return wav * np.float32(ceiling / peak)


def frame_energy_db(wav: np.ndarray, sr: int) -> np.ndarray:
    """Mean power per frame in dB ([n_frames]), frames of FRAME_SECONDS every HOP_SECONDS.

    A clip shorter than one frame is measured as a single frame.
    """
    wav = np.asarray(wav, dtype=np.float64)
    frame = max(1, round(FRAME_SECONDS * sr))
    hop = max(1, round(HOP_SECONDS * sr))
    if wav.shape[0] <= frame:
        power = np.array([np.mean(np.square(wav)) if wav.size else 0.0])
    else:
        n_frames = 1 + -(-(wav.shape[0] - frame) // hop)  # ceil: the last samples fall into a frame too
        wav = np.pad(wav, (0, (n_frames - 1) * hop + frame - wav.shape[0]))
        # Running sums give every frame's energy in O(T) without materializing the frames.
        cumulative = np.concatenate(([0.0], np.cumsum(np.square(wav))))
        starts = np.arange(n_frames) * hop
        power = (cumulative[starts + frame] - cumulative[starts]) / frame
    return 10.0 * np.log10(np.maximum(power, 1e-20))


def speech_bounds(
    wav: np.ndarray, sr: int, top_db: float = DEFAULT_TOP_DB, margin_seconds: float = DEFAULT_MARGIN_SECONDS
) -> tuple[int, int]:
    """Sample range [start, end) from the first to the last non-silent frame, widened by the margin.

    Returns (0, 0) when the whole clip is silent.
    """
    n = int(np.asarray(wav).shape[0])
    if n == 0:
        return 0, 0
    energy = frame_energy_db(wav, sr)
    threshold = max(float(energy.max()) - top_db, _TRIM_FLOOR_DB)
    loud = np.flatnonzero(energy > threshold)
    if loud.size == 0:
        return 0, 0
    hop = max(1, round(HOP_SECONDS * sr))
    frame = max(1, round(FRAME_SECONDS * sr))
    margin = round(margin_seconds * sr)
    start = max(0, int(loud[0]) * hop - margin)
    end = min(n, int(loud[-1]) * hop + frame + margin)
    return start, end


def trim_silence(
    wav: np.ndarray, sr: int, top_db: float = DEFAULT_TOP_DB, margin_seconds: float = DEFAULT_MARGIN_SECONDS
) -> np.ndarray:
    """Cut leading and trailing silence (frames `top_db` below the loudest); an all-silent clip gives []."""
    start, end = speech_bounds(wav, sr, top_db, margin_seconds)
    return np.asarray(wav, dtype=np.float32)[start:end].copy()
