"""Decode whatever audio a caller sends into float32 mono, and resample it.

Callers upload reference clips as wav, flac, mp3, ogg, m4a, webm... and some send garbage. Decoding tries
libsndfile first (exact and fast for wav/flac/ogg/mp3), then FFmpeg through PyAV for everything else. Every
failure becomes an `AudioInputError` that tells the caller what to send instead; nothing here lets a decoder
exception escape, because an upload must never crash a worker.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from rtvox.errors import AudioInputError

AudioSource = bytes | str | os.PathLike[str]

_FIX_HINT = "send wav/flac/mp3/ogg"
_BLOCK_FRAMES = 1 << 16


def decode_audio(
    src: AudioSource, *, max_seconds: float | None = None, param: str = "audio", label: str | None = None
) -> tuple[np.ndarray, int]:
    """Decode `src` (encoded bytes or a file path) to float32 mono in [-1, 1] at its own sample rate.

    Channels are averaged. `max_seconds` bounds the work a hostile upload can cause (a tiny FLAC of silence
    can expand to hours): decoding stops and fails once the audio is longer. `param` names the request field
    in the error; `label` names bytes read from somewhere the caller knows (a file's path) instead.
    """
    label, sf_source, av_source = _open_source(src, param, label)
    try:
        wav, sr = _decode_soundfile(sf_source, max_seconds)
    except (sf.SoundFileError, ValueError) as sf_error:
        import av  # FFmpeg only for what libsndfile cannot read: the synthesis path never loads it

        try:
            wav, sr = _decode_ffmpeg(av_source, max_seconds)
        except (av.FFmpegError, ValueError, OSError) as av_error:
            raise AudioInputError(
                f"could not decode {label} as audio: {_reason(av_error, sf_error)}; {_FIX_HINT}", param=param
            ) from av_error
    if max_seconds is not None and wav.shape[0] > max_seconds * sr:
        raise AudioInputError(
            f"{label} is longer than the {max_seconds:g} s that rtvox decodes; send a shorter clip",
            param=param,
        )
    if wav.shape[0] == 0:
        raise AudioInputError(f"could not decode {label} as audio: it has no samples; {_FIX_HINT}", param=param)
    # Float files can carry NaN/inf and lossy decoders overshoot full scale; the contract is finite [-1, 1].
    wav = np.clip(np.nan_to_num(wav, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)
    return wav.astype(np.float32, copy=False), sr


def resample(wav: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Resample float audio (shape [T] or [T, C]) from `sr_in` to `sr_out` Hz with soxr's HQ filter."""
    if sr_in <= 0 or sr_out <= 0:
        raise ValueError(f"sample rates must be positive, got {sr_in} -> {sr_out}")
    wav = np.asarray(wav, dtype=np.float32)
    if sr_in == sr_out or wav.shape[0] == 0:
        return wav.copy()
    out: np.ndarray = soxr.resample(wav, sr_in, sr_out, quality="HQ")
    return out.astype(np.float32, copy=False)


def load_audio(src: AudioSource, sr: int, *, max_seconds: float | None = None, param: str = "audio") -> np.ndarray:
    """Decode `src` to float32 mono and resample it to `sr` Hz."""
    wav, sr_in = decode_audio(src, max_seconds=max_seconds, param=param)
    return resample(wav, sr_in, sr)


def to_mono(wav: np.ndarray) -> np.ndarray:
    """Average the channels of [T, C] audio (channels last, as soundfile returns them); [T] passes through."""
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim == 1:
        return wav
    if wav.ndim != 2:
        raise ValueError(f"audio must be [T] or [T, C], got shape {wav.shape}")
    return wav.mean(axis=1, dtype=np.float32)


def _open_source(src: AudioSource, param: str, label: str | None) -> tuple[str, io.BytesIO | str, io.BytesIO | str]:
    """Return a label for messages and one independent handle per decoder (each reads from the start)."""
    if isinstance(src, bytes | bytearray | memoryview):
        data = bytes(src)
        name = label or f"the {param}"
        if not data:
            raise AudioInputError(f"could not decode {name} as audio: it is empty; {_FIX_HINT}", param=param)
        return name, io.BytesIO(data), io.BytesIO(data)
    path = Path(src)
    if not path.is_file():
        raise AudioInputError(f"could not decode {path} as audio: no such file; check the path", param=param)
    if path.stat().st_size == 0:
        raise AudioInputError(f"could not decode {path} as audio: the file is empty; {_FIX_HINT}", param=param)
    return str(path), str(path), str(path)


def _decode_soundfile(source: io.BytesIO | str, max_seconds: float | None) -> tuple[np.ndarray, int]:
    blocks: list[np.ndarray] = []
    n_samples = 0
    with sf.SoundFile(source) as f:
        sr = int(f.samplerate)
        # Read in blocks rather than trusting the header's length: a streamed or forged WAV header can
        # claim gigabytes.
        while True:
            block = f.read(frames=_BLOCK_FRAMES, dtype="float32", always_2d=True)
            if block.shape[0] == 0:
                break
            blocks.append(to_mono(block))
            n_samples += block.shape[0]
            if max_seconds is not None and n_samples > max_seconds * sr:
                break
    return (np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.float32)), sr


def _decode_ffmpeg(source: io.BytesIO | str, max_seconds: float | None) -> tuple[np.ndarray, int]:
    import av

    chunks: list[np.ndarray] = []
    n_samples = 0
    sr = 0
    with av.open(source, mode="r") as container:
        if not container.streams.audio:
            raise ValueError("it has no audio stream")
        stream = container.streams.audio[0]
        resampler: av.AudioResampler | None = None
        for frame in container.decode(stream):
            if resampler is None:
                # Planar float keeps the channels apart so we can average them ourselves (FFmpeg's own
                # downmix applies centre/surround gains we do not want).
                sr = int(frame.sample_rate)
                resampler = av.AudioResampler(format="fltp", layout=frame.layout, rate=sr)
            for out in resampler.resample(frame):
                block = out.to_ndarray().mean(axis=0, dtype=np.float32)  # [C, n] -> [n]
                chunks.append(block)
                n_samples += block.shape[0]
            if max_seconds is not None and n_samples > max_seconds * sr:
                break
        if resampler is not None:
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().mean(axis=0, dtype=np.float32))
    if not chunks:
        raise ValueError("it has no decodable audio frames")
    return np.concatenate(chunks), sr


def _reason(primary: Exception, fallback: Exception) -> str:
    """The decoder's own words: FFmpeg's message without its "[Errno N]" and the stream's internal name."""
    strerror = getattr(primary, "strerror", None)
    own = strerror if isinstance(strerror, str) else str(primary)
    text = own.strip() or str(fallback).strip() or type(primary).__name__
    return text.splitlines()[0]
