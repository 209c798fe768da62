from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rtvox.audio import MEDIA_TYPES, StreamEncoder, decode_audio, encode_audio, resample, write_audio
from rtvox.audio.encode import format_from_path, wav_header
from rtvox.constants import AUDIO_FORMATS, SAMPLE_RATE
from rtvox.errors import InputError

SR = SAMPLE_RATE
Speech = Callable[..., np.ndarray]
Correlate = Callable[..., float]
LOSSLESS = ("wav", "flac", "pcm")
LOSSY = ("mp3", "opus", "aac")
# Lossy codecs add encoder delay/padding (aac priming, mp3 without a LAME header when streamed).
MAX_EXTRA_SAMPLES = 2_500


def _decode(data: bytes, fmt: str) -> np.ndarray:
    """Decode our own output back to SR, whatever rate the decoder reports."""
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0
    wav, sr = decode_audio(data)
    return resample(wav, sr, SR)


def _chunks(wav: np.ndarray, sizes: tuple[int, ...] = (1, 2_399, 4_800, 7, 10_000)) -> list[np.ndarray]:
    """Uneven chunks, as a synthesizer yields them, including a one-sample and an empty chunk."""
    out, start, i = [wav[:0]], 0, 0
    while start < wav.shape[0]:
        out.append(wav[start : start + sizes[i % len(sizes)]])
        start += sizes[i % len(sizes)]
        i += 1
    return out


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_encode_round_trip(fmt: str, speech: Speech, correlate: Correlate) -> None:
    wav = speech(SR, 1.2)
    out = _decode(encode_audio(wav, SR, fmt), fmt)
    if fmt in LOSSLESS:
        assert out.shape == wav.shape
        np.testing.assert_allclose(out, wav, atol=1.0 / 32767 + 1e-6)
    else:
        assert wav.shape[0] - 5 <= out.shape[0] <= wav.shape[0] + MAX_EXTRA_SAMPLES
        assert correlate(wav, out) > 0.97


def test_mp3_file_keeps_exact_length(speech: Speech) -> None:
    # Written to a seekable buffer, the LAME header records the encoder delay so decoders remove it.
    wav = speech(SR, 1.0)
    assert _decode(encode_audio(wav, SR, "mp3"), "mp3").shape == wav.shape


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_stream_round_trip(fmt: str, speech: Speech, correlate: Correlate) -> None:
    wav = speech(SR, 1.2, seed=3)
    encoder = StreamEncoder(fmt, SR)
    parts = [encoder.encode(chunk) for chunk in _chunks(wav)]
    parts.append(encoder.flush())
    out = _decode(b"".join(parts), fmt)
    if fmt in LOSSLESS:
        np.testing.assert_allclose(out, wav, atol=1.0 / 32767 + 1e-6)
    else:
        assert wav.shape[0] - 5 <= out.shape[0] <= wav.shape[0] + MAX_EXTRA_SAMPLES
        assert correlate(wav, out) > 0.97
    if fmt == "flac":  # sent whole: its header must carry the length (below)
        assert sum(len(p) for p in parts[:-1]) == 0
    else:  # bytes come out while streaming, not only at the end
        assert sum(len(p) for p in parts[:-1]) > 0


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_streamed_file_reads_with_soundfile_to_its_length(fmt: str, speech: Speech) -> None:
    # What a client does with a saved response: soundfile (libsndfile) must find a finite, exact length. A
    # FLAC streamed through FFmpeg says "unknown length" (0) in its header, which libsndfile reads as endless.
    import io

    import soundfile as sf

    wav = speech(SR, 0.7, seed=5)
    encoder = StreamEncoder(fmt, SR)
    data = b"".join([*(encoder.encode(c) for c in _chunks(wav)), encoder.flush()])
    out, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == SR and out.shape == wav.shape
    np.testing.assert_allclose(out, wav, atol=1.0 / 32767 + 1e-6)


def test_empty_flac_stream_is_a_valid_empty_file() -> None:
    encoder = StreamEncoder("flac", SR)
    data = encoder.flush()
    assert data[:4] == b"fLaC"
    assert encoder.flush() == b""


@pytest.mark.parametrize("fmt", ["pcm", "wav"])
def test_stream_pcm_matches_file(fmt: str, speech: Speech) -> None:
    wav = speech(SR, 0.3)
    encoder = StreamEncoder(fmt, SR)
    streamed = b"".join([*(encoder.encode(c) for c in _chunks(wav)), encoder.flush()])
    whole = encode_audio(wav, SR, fmt)
    header = 44 if fmt == "wav" else 0
    assert streamed[header:] == whole[header:]
    if fmt == "wav":
        assert streamed[:44] == wav_header(SR, None)
        assert streamed[4:8] == b"\xff\xff\xff\xff" and streamed[40:44] == b"\xff\xff\xff\xff"


def test_empty_wav_stream_is_a_header() -> None:
    encoder = StreamEncoder("wav", SR)
    assert encoder.flush() == wav_header(SR, None)
    assert encoder.flush() == b""
    with pytest.raises(RuntimeError, match="after flush"):
        encoder.encode(np.zeros(10, np.float32))


def test_opus_at_a_rate_libopus_lacks(speech: Speech, correlate: Correlate) -> None:
    wav = speech(22_050, 1.0)
    data = encode_audio(wav, 22_050, "opus")
    out, sr = decode_audio(data)
    assert correlate(wav, resample(out, sr, 22_050)) > 0.97
    encoder = StreamEncoder("opus", 22_050)
    streamed = b"".join([*(encoder.encode(c) for c in _chunks(wav)), encoder.flush()])
    out, sr = decode_audio(streamed)
    assert correlate(wav, resample(out, sr, 22_050)) > 0.97


def test_out_of_range_samples_are_clipped() -> None:
    out = _decode(encode_audio(np.array([2.0, -2.0, 0.5], np.float32), SR, "wav"), "wav")
    np.testing.assert_allclose(out, [1.0, -1.0, 0.5], atol=1e-4)


def test_unknown_format_lists_the_choices() -> None:
    with pytest.raises(InputError) as info:
        encode_audio(np.zeros(10, np.float32), SR, "ogg-vorbis")
    for fmt in AUDIO_FORMATS:
        assert fmt in str(info.value)
    with pytest.raises(InputError):
        StreamEncoder("m4a", SR)
    assert encode_audio(np.zeros(10, np.float32), SR, " WAV ")[:4] == b"RIFF"


def test_rejects_non_mono() -> None:
    with pytest.raises(ValueError, match="mono"):
        encode_audio(np.zeros((10, 2), np.float32), SR, "wav")


def test_media_types_cover_every_format() -> None:
    assert set(MEDIA_TYPES) == set(AUDIO_FORMATS)


@pytest.mark.parametrize(("name", "fmt"), [("a.wav", "wav"), ("a.FLAC", "flac"), ("a.ogg", "opus"), ("a.raw", "pcm")])
def test_format_from_suffix(name: str, fmt: str) -> None:
    assert format_from_path(name) == fmt


def test_write_audio_infers_format_and_leaves_no_temp(tmp_path: Path, speech: Speech) -> None:
    wav = speech(SR, 0.5)
    for suffix in (".wav", ".flac", ".mp3", ".opus", ".aac"):
        path = write_audio(tmp_path / f"out{suffix}", wav, SR)
        out, _ = decode_audio(path)
        assert out.shape[0] > 0
    explicit = write_audio(tmp_path / "no_suffix", wav, SR, fmt="pcm")
    assert explicit.stat().st_size == 2 * wav.shape[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out.wav", "out.flac", "out.mp3", "out.opus", "out.aac", "no_suffix"]
    )


def test_write_audio_file_mode(tmp_path: Path) -> None:
    fresh = write_audio(tmp_path / "fresh.wav", np.zeros(10, np.float32), SR)
    assert fresh.stat().st_mode & 0o777 == 0o644
    existing = tmp_path / "existing.wav"
    existing.write_bytes(b"")
    existing.chmod(0o640)
    assert write_audio(existing, np.zeros(10, np.float32), SR).stat().st_mode & 0o777 == 0o640


def test_write_audio_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="suffix"):
        write_audio(tmp_path / "out.xyz", np.zeros(10, np.float32), SR)
    assert list(tmp_path.iterdir()) == []


def test_write_audio_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speech: Speech) -> None:
    target = tmp_path / "out.wav"
    target.write_bytes(b"previous")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_audio(target, speech(SR, 0.2), SR)
    assert target.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]
