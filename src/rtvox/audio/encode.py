"""Encode float audio into the response formats, as one file or as a stream of chunks.

Formats are those of `rtvox.constants.AUDIO_FORMATS`. wav/pcm are written by hand (16-bit little-endian),
flac through libsndfile, mp3/opus/aac through FFmpeg (PyAV). `StreamEncoder` serves chunked responses:
every `encode` returns the bytes ready so far and the concatenation of all returned bytes is one valid file.
flac is the exception: it is sent whole at the end, because a streamed FLAC cannot know its length and writes
"unknown" (0) into its header, which libsndfile (Python's soundfile) reads as an endless file and fails on.
`write_audio` writes through a temporary file and `os.replace`, so a crash never leaves half a file.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from rtvox.constants import AUDIO_FORMATS
from rtvox.errors import InputError
from rtvox.fsutil import atomic_write_bytes

MEDIA_TYPES: dict[str, str] = {
    "wav": "audio/wav",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "pcm": "audio/pcm",
}

# File suffixes we infer a format from; exact matches only.
_SUFFIX_FORMATS: dict[str, str] = {
    ".wav": "wav",
    ".flac": "flac",
    ".mp3": "mp3",
    ".opus": "opus",
    ".ogg": "opus",
    ".aac": "aac",
    ".pcm": "pcm",
    ".raw": "pcm",
}

# A streamed WAV cannot know its length up front; players read to the end of the stream when the RIFF and
# data sizes hold this maximum.
_STREAMING_SIZE = 0xFFFFFFFF
_INT16_SCALE = 32767.0


@dataclass(frozen=True)
class _FFmpegFormat:
    muxer: str  # FFmpeg container name
    codec: str  # FFmpeg encoder name
    sample_format: str  # the sample layout the encoder takes
    bit_rate: int | None  # bits per second; None for lossless
    # Rate used when the encoder cannot take ours (libopus takes 8/12/16/24/48 kHz only).
    fallback_rate: int = 48_000
    # Muxer options for streaming: small Ogg pages so Opus bytes leave as soon as they are encoded.
    stream_options: tuple[tuple[str, str], ...] = ()


_FFMPEG_FORMATS: dict[str, _FFmpegFormat] = {
    # Speech at 24 kHz mono: these rates are transparent for voice and keep streams small.
    "mp3": _FFmpegFormat("mp3", "libmp3lame", "fltp", 64_000),
    "opus": _FFmpegFormat("ogg", "libopus", "flt", 32_000, stream_options=(("page_duration", "100000"),)),
    "aac": _FFmpegFormat("adts", "aac", "fltp", 64_000),
    "flac": _FFmpegFormat("flac", "flac", "s16", None),
}


def check_format(fmt: str) -> str:
    """Return the canonical (lower-case) name of an output format, or raise InputError naming the choices."""
    name = fmt.strip().lower()
    if name not in AUDIO_FORMATS:
        raise InputError(
            f"unknown audio format {fmt!r}; use one of: {', '.join(AUDIO_FORMATS)}", param="response_format"
        )
    return name


def format_from_path(path: str | os.PathLike[str]) -> str:
    """The output format named by a file's suffix (.wav, .flac, .mp3, .opus/.ogg, .aac, .pcm/.raw)."""
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIX_FORMATS:
        raise InputError(
            f"cannot tell the audio format of {os.fspath(path)!r} from its suffix; name it with one of "
            f"{', '.join(sorted(_SUFFIX_FORMATS))} or pass the format ({', '.join(AUDIO_FORMATS)})",
            param="format",
        )
    return _SUFFIX_FORMATS[suffix]


def to_pcm16(wav: np.ndarray) -> bytes:
    """Float audio in [-1, 1] as signed 16-bit little-endian bytes (values outside are clipped)."""
    samples = np.clip(_as_mono_float(wav), -1.0, 1.0) * _INT16_SCALE
    return np.round(samples).astype("<i2").tobytes()


WAV_HEADER_BYTES = 44  # what wav_header writes


def wav_header(sr: int, data_bytes: int | None) -> bytes:
    """44-byte header of a mono 16-bit PCM WAV file; `data_bytes=None` gives a streaming header."""
    riff_size = _STREAMING_SIZE if data_bytes is None else 36 + data_bytes
    data_size = _STREAMING_SIZE if data_bytes is None else data_bytes
    block_align = 2  # one channel of two bytes
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", riff_size, b"WAVE",
        b"fmt ", 16, 1, 1, sr, sr * block_align, block_align, 16,
        b"data", data_size,
    )  # fmt: skip


def encode_audio(wav: np.ndarray, sr: int, fmt: str) -> bytes:
    """Encode mono float audio at `sr` Hz as one complete file of format `fmt` (see AUDIO_FORMATS)."""
    fmt = check_format(fmt)
    if fmt == "pcm":
        return to_pcm16(wav)
    if fmt == "wav":
        pcm = to_pcm16(wav)
        return wav_header(sr, len(pcm)) + pcm
    if fmt == "flac" and np.asarray(wav).size:  # libsndfile writes nothing at all for no samples: FFmpeg below
        buffer = io.BytesIO()
        sf.write(buffer, np.clip(_as_mono_float(wav), -1.0, 1.0), sr, format="FLAC", subtype="PCM_16")
        return buffer.getvalue()
    # A seekable buffer lets the muxer go back and fill in its header (for mp3, the encoder delay, so
    # decoders drop the padding and the length round-trips exactly).
    buffer = io.BytesIO()
    writer = _FFmpegWriter(_FFMPEG_FORMATS[fmt], sr, buffer, streaming=False)
    writer.write(_as_mono_float(wav))
    writer.close()
    return buffer.getvalue()


def write_audio(path: str | os.PathLike[str], wav: np.ndarray, sr: int, fmt: str | None = None) -> Path:
    """Encode `wav` and write it to `path` atomically; the format comes from the suffix unless given."""
    target = Path(path)
    data = encode_audio(wav, sr, format_from_path(target) if fmt is None else fmt)
    return atomic_write_bytes(target, data)


class StreamEncoder:
    """Encodes audio chunk by chunk for a streaming response.

    Owns one encoder state for one stream: call `encode` per chunk of mono float audio (any length) and send
    what it returns, then `flush` once at the end. Some codecs hold samples back until a frame is full, so a
    call may return b"". wav streams carry a header whose sizes mean "until the end of the stream"; flac holds
    everything back and `flush` returns one complete file (see the module's docstring).
    """

    def __init__(self, fmt: str, sr: int) -> None:
        self.fmt = check_format(fmt)
        self.sr = sr
        self._closed = False
        self._header_sent = False
        self._sink: _ChunkSink | None = None
        self._writer: _FFmpegWriter | None = None
        self._held: list[np.ndarray] | None = [] if self.fmt == "flac" else None  # flac goes out whole at flush
        if self.fmt in _FFMPEG_FORMATS and self._held is None:
            self._sink = _ChunkSink()
            self._writer = _FFmpegWriter(_FFMPEG_FORMATS[self.fmt], sr, self._sink, streaming=True)

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode one chunk; returns the bytes that are ready (possibly none)."""
        if self._closed:
            raise RuntimeError("StreamEncoder.encode called after flush")
        chunk = _as_mono_float(chunk)
        if self._held is not None:
            self._held.append(chunk.copy())
            return b""
        if self._writer is not None and self._sink is not None:
            self._writer.write(chunk)
            return self._sink.take()
        return self._wav_header_once() + to_pcm16(chunk)

    def flush(self) -> bytes:
        """End the stream and return the remaining bytes; the encoder cannot be used afterwards."""
        if self._closed:
            return b""
        self._closed = True
        if self._held is not None:  # one complete file whose header carries the length
            audio = np.concatenate(self._held) if self._held else np.zeros(0, dtype=np.float32)
            self._held = []
            return encode_audio(audio, self.sr, self.fmt)
        if self._writer is not None and self._sink is not None:
            self._writer.close()
            return self._sink.take()
        return self._wav_header_once()

    def _wav_header_once(self) -> bytes:
        # The header goes out with the first bytes, so even an empty wav stream is a valid file.
        if self.fmt != "wav" or self._header_sent:
            return b""
        self._header_sent = True
        return wav_header(self.sr, None)


class _ChunkSink:
    """Write-only, non-seekable file object that collects what FFmpeg writes until it is taken."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: Any) -> int:
        block = bytes(data)
        self._parts.append(block)
        return len(block)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class _FFmpegWriter:
    """One PyAV output container with one audio stream; resamples if the encoder cannot take our rate."""

    def __init__(self, spec: _FFmpegFormat, sr: int, sink: Any, *, streaming: bool) -> None:
        import av  # FFmpeg only for mp3/opus/aac: wav, pcm and flac never load it
        from av.audio.stream import AudioStream

        self._spec = spec
        self._audio_frame = av.AudioFrame
        rates = av.Codec(spec.codec, "w").audio_rates
        self._rate = sr if not rates or sr in rates else spec.fallback_rate
        self._resampler = (
            soxr.ResampleStream(sr, self._rate, 1, dtype="float32", quality="HQ") if self._rate != sr else None
        )
        options = {"flush_packets": "1", **dict(spec.stream_options)} if streaming else {}
        self._container = av.open(sink, mode="w", format=spec.muxer, container_options=options)
        stream = self._container.add_stream(spec.codec, rate=self._rate)
        assert isinstance(stream, AudioStream)
        self._stream = stream
        self._stream.layout = "mono"
        self._stream.format = spec.sample_format
        if spec.bit_rate is not None:
            self._stream.bit_rate = spec.bit_rate
        self._pts = 0

    def write(self, wav: np.ndarray) -> None:
        if self._resampler is not None:
            wav = self._resampler.resample_chunk(wav, last=False)
        self._encode(wav)

    def close(self) -> None:
        if self._resampler is not None:
            self._encode(self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()

    def _encode(self, wav: np.ndarray) -> None:
        if wav.shape[0] == 0:
            return
        samples = np.clip(wav, -1.0, 1.0).astype(np.float32)
        if self._spec.sample_format == "s16":
            samples = np.round(samples * _INT16_SCALE).astype(np.int16)
        frame = self._audio_frame.from_ndarray(samples[None, :], format=self._spec.sample_format, layout="mono")
        frame.sample_rate = self._rate
        frame.pts = self._pts
        self._pts += samples.shape[0]
        for packet in self._stream.encode(frame):
            self._container.mux(packet)


def _as_mono_float(wav: np.ndarray) -> np.ndarray:
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim != 1:
        raise ValueError(f"expected mono audio of shape [T], got shape {wav.shape}")
    return wav
