from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf

from rtvox.audio import decode_audio, encode_audio, load_audio, resample, to_mono
from rtvox.errors import AudioInputError

SR = 24_000
Speech = Callable[..., np.ndarray]
ToWav = Callable[..., bytes]
Correlate = Callable[..., float]


def _ffmpeg_bytes(wav: np.ndarray, sr: int, muxer: str, codec: str, sample_format: str) -> bytes:
    """Encode with PyAV into containers our encoder does not produce (m4a, webm)."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=muxer) as container:
        stream = container.add_stream(codec, rate=sr)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(wav[None, :], format=sample_format, layout="mono")
        frame.sample_rate = sr
        frame.pts = 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()


def test_wav_bytes_decode_exactly(speech: Speech, to_wav: ToWav) -> None:
    wav = speech(SR, 0.5)
    out, sr = decode_audio(to_wav(wav, SR, subtype="FLOAT"))
    assert sr == SR and out.dtype == np.float32
    np.testing.assert_array_equal(out, wav)


@pytest.mark.parametrize("fmt", ["FLAC", "OGG"])
def test_soundfile_formats_decode(fmt: str, speech: Speech, to_wav: ToWav, correlate: Correlate) -> None:
    wav = speech(SR, 0.5)
    subtype = "VORBIS" if fmt == "OGG" else "PCM_16"
    out, sr = decode_audio(to_wav(wav, SR, subtype=subtype, fmt=fmt))
    assert sr == SR
    assert correlate(wav, out, max_lag=100) > 0.99


@pytest.mark.parametrize(
    ("muxer", "codec", "sample_format"),
    [("mp4", "aac", "fltp"), ("webm", "libopus", "flt"), ("mp3", "libmp3lame", "fltp")],
)
def test_ffmpeg_containers_decode(
    muxer: str, codec: str, sample_format: str, speech: Speech, correlate: Correlate
) -> None:
    wav = speech(48_000, 0.5)
    out, sr = decode_audio(_ffmpeg_bytes(wav, 48_000, muxer, codec, sample_format))
    assert sr == 48_000
    assert correlate(wav, out) > 0.95


def test_path_and_pathlike_sources(tmp_path: Path, speech: Speech, to_wav: ToWav) -> None:
    wav = speech(SR, 0.3)
    path = tmp_path / "clip.wav"
    path.write_bytes(to_wav(wav, SR))
    from_str, _ = decode_audio(str(path))
    from_path, _ = decode_audio(path)
    from_bytes, _ = decode_audio(path.read_bytes())
    np.testing.assert_array_equal(from_str, from_path)
    np.testing.assert_array_equal(from_str, from_bytes)


def test_stereo_is_averaged_to_mono(speech: Speech, to_wav: ToWav) -> None:
    left = speech(SR, 0.3, seed=1)
    right = speech(SR, 0.3, seed=2) * 0.5
    out, _ = decode_audio(to_wav(np.stack([left, right], axis=1), SR, subtype="FLOAT"))
    np.testing.assert_allclose(out, (left + right) / 2, atol=1e-7)


def test_stereo_ffmpeg_is_averaged_to_mono(speech: Speech) -> None:
    tone = speech(SR, 0.3)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="matroska") as container:
        stream = container.add_stream("pcm_f32le", rate=SR)
        stream.layout = "stereo"
        frame = av.AudioFrame.from_ndarray(np.stack([tone, np.zeros_like(tone)]), format="fltp", layout="stereo")
        frame.sample_rate = SR
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    out, _ = decode_audio(buffer.getvalue())
    np.testing.assert_allclose(out, tone / 2, atol=1e-6)


@pytest.mark.parametrize("sr_in", [8_000, 11_025, 16_000, 44_100, 48_000])
def test_load_audio_resamples_any_rate(sr_in: int, to_wav: ToWav) -> None:
    seconds, freq = 0.5, 440.0
    t = np.arange(round(sr_in * seconds)) / sr_in
    out = load_audio(to_wav((0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr_in), SR)
    assert abs(out.shape[0] - seconds * SR) <= 1
    spectrum = np.abs(np.fft.rfft(out * np.hanning(out.shape[0])))
    assert abs(np.argmax(spectrum) * SR / out.shape[0] - freq) < 5.0


def test_resample_identity_and_errors(speech: Speech) -> None:
    wav = speech(SR, 0.1)
    np.testing.assert_array_equal(resample(wav, SR, SR), wav)
    assert resample(np.zeros(0, np.float32), SR, 16_000).shape == (0,)
    with pytest.raises(ValueError, match="positive"):
        resample(wav, 0, SR)


def test_output_is_finite_and_in_range(to_wav: ToWav) -> None:
    wav = np.array([0.5, np.nan, 2.0, -3.0, np.inf, -0.25], dtype=np.float32)
    out, _ = decode_audio(to_wav(wav, SR, subtype="FLOAT"))
    np.testing.assert_array_equal(out, [0.5, 0.0, 1.0, -1.0, 1.0, -0.25])


def test_streaming_wav_header_decodes(speech: Speech) -> None:
    wav = speech(SR, 0.2)
    pcm = np.round(wav * 32767).astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        0xFFFFFFFF,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        SR,
        2 * SR,
        2,
        16,
        b"data",
        0xFFFFFFFF,
    )
    out, sr = decode_audio(header + pcm)
    assert sr == SR and out.shape == wav.shape


def test_max_seconds_stops_long_audio(speech: Speech, to_wav: ToWav) -> None:
    data = to_wav(speech(SR, 2.0), SR)
    with pytest.raises(AudioInputError, match="longer than the 1 s"):
        decode_audio(data, max_seconds=1.0)
    assert decode_audio(data, max_seconds=3.0)[0].shape[0] == 2 * SR
    with pytest.raises(AudioInputError, match="longer than"):
        decode_audio(encode_audio(speech(SR, 2.0), SR, "mp3"), max_seconds=1.0)


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_raise_audio_input_error(seed: int) -> None:
    data = np.random.default_rng(seed).integers(0, 256, size=64 << seed, dtype=np.uint8).tobytes()
    with pytest.raises(AudioInputError, match=r"could not decode .* as audio: .*; send wav/flac/mp3/ogg") as info:
        decode_audio(data, param="input")
    assert info.value.param == "input"
    assert "Errno" not in str(info.value) and "<none>" not in str(info.value)  # FFmpeg's words, not its plumbing


def test_text_and_empty_inputs_raise(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("this is not audio\n" * 50)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    for src in (text, empty, b"", text.read_bytes()):
        with pytest.raises(AudioInputError, match="send wav/flac/mp3/ogg"):
            decode_audio(src)
    with pytest.raises(AudioInputError, match="no such file"):
        decode_audio(tmp_path / "missing.wav")
    with pytest.raises(AudioInputError, match="no such file"):
        decode_audio(tmp_path)


@pytest.mark.parametrize("keep", [4, 20, 44, 45, 1000])
def test_truncated_wav_never_crashes(keep: int, speech: Speech, to_wav: ToWav) -> None:
    data = to_wav(speech(SR, 0.2), SR)[:keep]
    try:
        out, sr = decode_audio(data)
    except AudioInputError as e:
        assert "could not decode" in str(e)
    else:
        # A cut inside the samples still gives the samples that are there.
        assert sr == SR and 0 < out.shape[0] <= (keep - 44) // 2


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac"])
def test_truncated_compressed_never_crashes(fmt: str, speech: Speech) -> None:
    data = encode_audio(speech(SR, 0.5), SR, fmt)
    for keep in (10, len(data) // 2):
        try:
            out, _ = decode_audio(data[:keep])
        except AudioInputError:
            continue
        assert np.all(np.isfinite(out)) and np.max(np.abs(out)) <= 1.0


def test_to_mono_shapes() -> None:
    assert to_mono(np.zeros(5)).shape == (5,)
    np.testing.assert_array_equal(to_mono(np.array([[1.0, 0.0], [0.5, 0.5]])), [0.5, 0.5])
    with pytest.raises(ValueError, match="shape"):
        to_mono(np.zeros((1, 2, 3)))


def test_soundfile_read_failure_falls_back_to_ffmpeg(speech: Speech, correlate: Correlate) -> None:
    # libsndfile cannot read AAC in ADTS; FFmpeg can.
    wav = speech(SR, 0.5)
    with pytest.raises(sf.LibsndfileError):
        sf.read(io.BytesIO(encode_audio(wav, SR, "aac")))
    out, sr = decode_audio(encode_audio(wav, SR, "aac"))
    assert sr == SR and correlate(wav, out) > 0.95
