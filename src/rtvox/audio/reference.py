"""Reference clips for voice cloning: decode, trim, check, resample and level one uploaded recording.

A bad reference gives a bad voice with no error, so the checks run here, before any model sees the clip,
and each failure says what was measured, what the limit is and what to do. Measurements are taken on the
decoded clip at its own rate after trimming leading and trailing silence: the length limits are about the
speech in it, and clipping is judged on the samples as recorded (resampling would smear it).
"""

from __future__ import annotations

import numpy as np

from rtvox.audio.decode import AudioSource, decode_audio, resample
from rtvox.audio.loudness import DEFAULT_TARGET_LUFS, normalize_loudness, rms_dbfs, trim_silence
from rtvox.constants import HOP_LENGTH, REF_MAX_SECONDS, REF_MIN_SECONDS, SAMPLE_RATE
from rtvox.errors import AudioInputError

# Speech recorded at a sane level sits around -30..-15 dBFS RMS; below this there is nothing to clone.
SILENCE_RMS_DBFS = -60.0
# A sample this close to full scale was (almost surely) clipped by the recorder or by a gain stage.
CLIP_LEVEL = 0.999
# More than this share of clipped samples distorts the timbre the speaker encoder measures.
MAX_CLIPPED_FRACTION = 0.01
# Decoding stops past this much audio, however much silence trimming would remove: an upload that long is
# a mistake or an attack, and decoding it would cost memory for nothing.
DECODE_LIMIT_SECONDS = 600.0
# Speech is voiced (periodic: vowels, voiced consonants) in 30-80 % of its frames, and its pitch moves. A clip
# with under this much voiced audio is noise, breath or whisper (clean test speech keeps 0.5-0.8 s of voicing
# even under white noise at 0 dB SNR; at -5 dB it drops to 0.1 s): the speaker encoder would clone the noise.
MIN_VOICED_SECONDS = 0.3
# A clip voiced nearly throughout at one pitch is a tone, a hum or a held note: speech has unvoiced consonants
# and pauses (voiced share <= 0.8 on recorded speech) and its pitch spreads over semitones (median absolute
# deviation 0.7-4 semitones on recorded and synthetic speech; 0.0-0.1 for a sine, a square wave or mains hum).
TONE_VOICED_SHARE = 0.97
TONE_MAX_SPREAD_SEMITONES = 0.25
DEFAULT_PARAM = "reference_audio"


def prepare_reference(
    src: AudioSource,
    *,
    sr: int = SAMPLE_RATE,
    min_seconds: float = REF_MIN_SECONDS,
    max_seconds: float = REF_MAX_SECONDS,
    target_lufs: float = DEFAULT_TARGET_LUFS,
    param: str = DEFAULT_PARAM,
    label: str | None = None,
) -> np.ndarray:
    """Decode an uploaded reference clip and return it checked, trimmed and leveled: float32 mono at `sr` Hz.

    `sr` is SAMPLE_RATE (24 kHz, for the acoustic model) by default; pass SPEAKER_SAMPLE_RATE (16 kHz) to feed
    the speaker encoder directly. Raises AudioInputError (with `param` as the field name) when the clip
    cannot be decoded or is silent, too short, too long, clipped, or not speech (noise, a steady tone).
    """
    wav, sr_in = decode_audio(src, max_seconds=max(DECODE_LIMIT_SECONDS, max_seconds), param=param, label=label)
    return prepare_reference_array(
        wav,
        sr_in,
        sr=sr,
        min_seconds=min_seconds,
        max_seconds=max_seconds,
        target_lufs=target_lufs,
        param=param,
    )


def prepare_reference_array(
    wav: np.ndarray,
    sr_in: int,
    *,
    sr: int = SAMPLE_RATE,
    min_seconds: float = REF_MIN_SECONDS,
    max_seconds: float = REF_MAX_SECONDS,
    target_lufs: float = DEFAULT_TARGET_LUFS,
    param: str = DEFAULT_PARAM,
) -> np.ndarray:
    """`prepare_reference` for audio already decoded to mono float in [-1, 1] at `sr_in` Hz."""
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim != 1:
        raise ValueError(f"expected mono audio of shape [T], got shape {wav.shape}")
    speech = trim_silence(wav, sr_in)
    check_reference(speech, sr_in, min_seconds=min_seconds, max_seconds=max_seconds, param=param)
    out = resample(speech, sr_in, sr)
    check_voicing(out, sr, param=param)
    return normalize_loudness(out, sr, target_lufs)


def voicing(speech: np.ndarray, sr: int) -> tuple[float, float, float]:
    """(voiced seconds, voiced share of frames, pitch spread in semitones: median absolute deviation of the
    voiced frames' log F0) of a clip, from the YIN tracker the training packer uses. Pitch is searched down to
    50 Hz only where the tracker's window holds two periods of it, so pass audio at 16 kHz or more."""
    from rtvox.audio.pitch import frame_f0

    hop = max(1, round(sr * HOP_LENGTH / SAMPLE_RATE))
    n_frames = speech.shape[0] // hop
    if n_frames == 0:
        return 0.0, 0.0, 0.0
    f0 = frame_f0(speech, n_frames, sample_rate=sr, hop=hop)
    voiced = f0[f0 > 0]
    if voiced.size == 0:
        return 0.0, 0.0, 0.0
    semitones = 12.0 * np.log2(voiced / np.median(voiced))
    spread = float(np.median(np.abs(semitones - np.median(semitones))))
    return voiced.size * hop / sr, voiced.size / n_frames, spread


def check_voicing(speech: np.ndarray, sr: int, *, param: str = DEFAULT_PARAM) -> None:
    """Raise AudioInputError if a (trimmed, non-silent) clip is not speech: next to no voiced frames (noise,
    breath, whisper) or voiced throughout at one pitch (a tone, hum or held note)."""
    seconds, share, spread = voicing(speech, sr)
    if seconds < MIN_VOICED_SECONDS:
        raise AudioInputError(
            f"reference audio has no voiced speech: {seconds:.1f} s of its {speech.shape[0] / sr:.1f} s is voiced, "
            f"at least {MIN_VOICED_SECONDS:g} s needed; it sounds like noise, breath or whisper. Send a recording "
            "of someone speaking in a normal voice with little background noise",
            param=param,
        )
    if share >= TONE_VOICED_SHARE and spread < TONE_MAX_SPREAD_SEMITONES:
        raise AudioInputError(
            f"reference audio is a steady tone, not speech: voiced in {share:.0%} of frames at one pitch "
            f"(spread {spread:.2f} semitones; speech has pauses and moves its pitch by more than "
            f"{TONE_MAX_SPREAD_SEMITONES:g}). Send a recording of someone speaking",
            param=param,
        )


def check_reference(
    speech: np.ndarray,
    sr: int,
    *,
    min_seconds: float = REF_MIN_SECONDS,
    max_seconds: float = REF_MAX_SECONDS,
    param: str = DEFAULT_PARAM,
) -> None:
    """Raise AudioInputError if trimmed speech is silent, shorter than `min_seconds`, longer than
    `max_seconds`, or clipped; checked in that order so the first message names the root problem."""
    level = rms_dbfs(speech)
    if level < SILENCE_RMS_DBFS:
        measured = "no signal" if not np.isfinite(level) else f"an RMS level of {level:.1f} dBFS"
        raise AudioInputError(
            f"reference audio is silent: it has {measured}, below the {SILENCE_RMS_DBFS:g} dBFS minimum; "
            "send a recording of someone speaking",
            param=param,
        )
    seconds = speech.shape[0] / sr
    if seconds < min_seconds:
        raise AudioInputError(
            f"reference audio is too short: {seconds:.1f} s of speech after trimming silence, at least "
            f"{min_seconds:g} s needed; send a longer clip",
            param=param,
        )
    if seconds > max_seconds:
        raise AudioInputError(
            f"reference audio is too long: {seconds:.1f} s of speech after trimming silence, at most "
            f"{max_seconds:g} s allowed; cut the clip to one continuous passage",
            param=param,
        )
    clipped = float(np.mean(np.abs(speech) >= CLIP_LEVEL))
    if clipped > MAX_CLIPPED_FRACTION:
        raise AudioInputError(
            f"reference audio is clipped: {clipped:.1%} of samples at full scale, at most "
            f"{MAX_CLIPPED_FRACTION:.0%} allowed; record again at a lower input level",
            param=param,
        )
