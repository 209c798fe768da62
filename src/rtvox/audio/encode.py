"""Encode float audio into the response formats, as one file or as a stream of chunks.

Formats are those of `rtvox.constants.AUDIO_FORMATS`. wav/pcm are written by hand (16-bit little-endian),
flac through libsndfile, mp3/opus/aac through FFmpeg (PyAV). `FileEncoder` is the one place that knows the
formats: it encodes chunk by chunk into a binary file object, and the rest are thin uses of it.
`encode_audio` returns one file as bytes; `audio_file_writer` writes a file chunk by chunk (a book from its
parts, memory one chunk) through a temporary file renamed over the target at the end (`rtvox.fsutil.atomic_open`),
so a crash never leaves half a file, and `write_audio` is it with one chunk. `StreamEncoder` serves chunked
responses: every `encode` returns the bytes ready so far and the concatenation of all returned bytes is one
valid file. flac is the exception: it is sent whole at the end, because a streamed FLAC cannot know its length
and writes "unknown" (0) into its header, which libsndfile (Python's soundfile) reads as an endless file and
fails on.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import soundfile as sf
import soxr

from rtvox.constants import AUDIO_FORMATS
from rtvox.errors import InputError
from rtvox.fsutil import atomic_open

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
# flac for a non-seekable output is built here first (its header is written last): memory up to this, then disk.
_FLAC_SPOOL_BYTES = 32 << 20


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


class FileEncoder:
    """Encodes mono float audio into one file of format `fmt`, chunk by chunk, onto a binary file object.

    Owns the format's encoder state; `out` stays the caller's (never closed here). Call `write` per chunk, then
    `close` once to finish the file (or `abort` after a failure). A seekable `out` gets the complete file (for
    pcm, wav and flac byte for byte what `encode_audio` gives for all the audio at once): the wav sizes and
    FFmpeg's header (mp3's encoder delay, so the length round-trips exactly) are filled in at `close` by seeking
    back. A non-seekable one (a pipe, a response stream) gets the streaming form: a wav header meaning "until
    the end", FFmpeg's streaming muxing (mp3 then carries no delay header); flac, whose header must carry its
    length, is built in a seekable spool and copied out at `close`. Memory is one chunk (plus that spool, on disk
    past its limit).
    """

    def __init__(self, out: IO[bytes] | io.RawIOBase, sr: int, fmt: str) -> None:
        self.fmt = check_format(fmt)
        self.sr = sr
        self.samples = 0  # written so far
        self._out = out
        seekable = out.seekable()
        if seekable and out.tell() != 0:  # libsndfile and FFmpeg seek to absolute offsets to fill in headers
            raise ValueError("FileEncoder writes a whole file: give it an output positioned at its start")
        self._wav_start: int | None = None  # where the wav header to patch at close begins
        self._ffmpeg: _FFmpegWriter | None = None
        self._flac: sf.SoundFile | None = None  # opened at the first sample (no samples: see close)
        self._flac_out: IO[bytes] | io.RawIOBase = out
        self._spool: IO[bytes] | None = None
        if self.fmt == "wav":
            self._wav_start = out.tell() if seekable else None
            out.write(wav_header(sr, 0 if seekable else None))  # sizes patched at close
        elif self.fmt == "flac" and not seekable:
            self._spool = tempfile.SpooledTemporaryFile(max_size=_FLAC_SPOOL_BYTES)  # noqa: SIM115  # closed by close/abort
            self._flac_out = self._spool
        elif self.fmt in _FFMPEG_FORMATS and self.fmt != "flac":
            # A seekable file lets the muxer go back and fill in its header at the end.
            self._ffmpeg = _FFmpegWriter(_FFMPEG_FORMATS[self.fmt], sr, out, streaming=not seekable)

    def write(self, wav: np.ndarray) -> None:
        """Encode one chunk of mono float audio (any length, values outside [-1, 1] clipped)."""
        wav = _as_mono_float(wav)
        self.samples += wav.shape[0]
        if self._ffmpeg is not None:
            self._ffmpeg.write(wav)
        elif self.fmt == "flac":
            if wav.shape[0] == 0:
                return
            if self._flac is None:
                self._flac = sf.SoundFile(self._flac_out, "w", self.sr, 1, format="FLAC", subtype="PCM_16")
            self._flac.write(np.clip(wav, -1.0, 1.0))
        else:  # pcm, wav
            self._out.write(to_pcm16(wav))

    def close(self) -> None:
        """Finish the file: flush the codec, fill in headers; the bytes on `out` are then one whole file."""
        if self._ffmpeg is not None:
            self._ffmpeg.close()
        elif self.fmt == "flac":
            if self._flac is not None:
                self._flac.close()
            else:  # libsndfile writes nothing at all for no samples: FFmpeg's flac holds an empty stream
                writer = _FFmpegWriter(_FFMPEG_FORMATS["flac"], self.sr, self._flac_out, streaming=False)
                writer.close()
            if self._spool is not None:
                self._spool.seek(0)
                shutil.copyfileobj(self._spool, self._out)
                self._spool.close()
        elif self._wav_start is not None:
            data_bytes = 2 * self.samples
            # past what a RIFF size can hold (24.8 h at 24 kHz), the streaming sizes: players read to the end
            header = wav_header(self.sr, data_bytes if 36 + data_bytes < _STREAMING_SIZE else None)
            end = self._out.tell()
            self._out.seek(self._wav_start)
            self._out.write(header)
            self._out.seek(end)

    def abort(self) -> None:
        """Release the encoder after a failure without finishing the file (its bytes are to be thrown away)."""
        closers = [w.abort for w in (self._ffmpeg,) if w is not None]
        closers += [f.close for f in (self._flac, self._spool) if f is not None]
        for close in closers:
            # the error that stopped the writing is the one to report, not a follow-up from closing
            with contextlib.suppress(Exception):
                close()


def encode_audio(wav: np.ndarray, sr: int, fmt: str) -> bytes:
    """Encode mono float audio at `sr` Hz as one complete file of format `fmt` (see AUDIO_FORMATS)."""
    buffer = io.BytesIO()
    encoder = FileEncoder(buffer, sr, fmt)
    encoder.write(wav)
    encoder.close()
    return buffer.getvalue()


@contextlib.contextmanager
def audio_file_writer(path: str | os.PathLike[str], sr: int, fmt: str | None = None) -> Iterator[FileEncoder]:
    """Write an audio file chunk by chunk: `with audio_file_writer(path, sr) as out: out.write(chunk)...`.

    The format comes from the suffix unless given. The file appears whole when the block ends without an error,
    or not at all: it is encoded into a temporary file beside the target, renamed over it at the end
    (`rtvox.fsutil.atomic_open`: modes, links, and devices or FIFOs, written in place, as there). A target that
    cannot seek (a FIFO) gets the streaming form of the format (see FileEncoder)."""
    name = format_from_path(path) if fmt is None else check_format(fmt)
    with atomic_open(path) as fh:
        encoder = FileEncoder(fh, sr, name)
        try:
            yield encoder
            encoder.close()
        except BaseException:  # the caller's error, or the codec's at close (a disk that fills): nothing is kept
            encoder.abort()
            raise


def write_audio(path: str | os.PathLike[str], wav: np.ndarray, sr: int, fmt: str | None = None) -> Path:
    """Encode `wav` and write it to `path` atomically; the format comes from the suffix unless given."""
    with audio_file_writer(path, sr, fmt) as out:
        out.write(wav)
    return Path(path)


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
        self._sink = _ChunkSink()
        self._encoder: FileEncoder | None = FileEncoder(self._sink, sr, self.fmt)  # None once flushed

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode one chunk; returns the bytes that are ready (possibly none)."""
        if self._encoder is None:
            raise RuntimeError("StreamEncoder.encode called after flush or abort")
        self._encoder.write(chunk)
        return self._sink.take()

    def flush(self) -> bytes:
        """End the stream and return the remaining bytes; the encoder cannot be used afterwards."""
        if self._encoder is None:
            return b""
        encoder, self._encoder = self._encoder, None
        encoder.close()
        return self._sink.take()

    def abort(self) -> None:
        """End a stream that will not be finished (its client left, it failed): release the codec now rather
        than when the garbage collector finds it; what was held back is dropped. Safe to call more than once
        and after `flush` (then it does nothing); not while `encode` or `flush` runs on another thread."""
        if self._encoder is None:
            return
        encoder, self._encoder = self._encoder, None
        encoder.abort()
        self._sink.take()


class _ChunkSink(io.RawIOBase):
    """Write-only, non-seekable file object that collects what is written until it is taken."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

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

    def abort(self) -> None:
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
