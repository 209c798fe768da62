from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rtvox.audio import encode_audio, integrated_loudness, prepare_reference, prepare_reference_array
from rtvox.audio.decode import resample
from rtvox.audio.reference import voicing
from rtvox.constants import REF_MAX_SECONDS, REF_MIN_SECONDS, SAMPLE_RATE, SPEAKER_SAMPLE_RATE
from rtvox.errors import AudioInputError

Speech = Callable[..., np.ndarray]
ToWav = Callable[..., bytes]


def _padded(speech: Speech, sr: int, seconds: float, pad_seconds: float = 1.0, level: float = 0.3) -> np.ndarray:
    silence = np.zeros(round(pad_seconds * sr), np.float32)
    return np.concatenate([silence, speech(sr, seconds, level=level), silence])


@pytest.mark.parametrize("sr_in", [8_000, 11_025, 44_100, 48_000])
@pytest.mark.parametrize("sr", [SAMPLE_RATE, SPEAKER_SAMPLE_RATE])
def test_prepares_any_rate_trimmed_and_leveled(sr_in: int, sr: int, speech: Speech, to_wav: ToWav) -> None:
    wav = _padded(speech, sr_in, 4.0, level=0.05)
    out = prepare_reference(to_wav(wav, sr_in), sr=sr)
    assert out.dtype == np.float32 and out.ndim == 1
    # 4 s of speech plus at most a margin and a frame either side survive trimming.
    assert 4.0 * sr <= out.shape[0] <= 4.2 * sr
    loudness = integrated_loudness(out, sr)
    assert loudness is not None and loudness == pytest.approx(-20.0, abs=0.3)


def test_stereo_file_on_disk(tmp_path: Path, speech: Speech, to_wav: ToWav) -> None:
    mono = speech(44_100, 3.5)
    path = tmp_path / "ref.flac"
    path.write_bytes(to_wav(np.stack([mono, mono], axis=1), 44_100, fmt="FLAC"))
    assert prepare_reference(path, sr=SPEAKER_SAMPLE_RATE).shape[0] == pytest.approx(3.5 * 16_000, rel=0.03)


def test_compressed_upload(speech: Speech) -> None:
    data = encode_audio(_padded(speech, SAMPLE_RATE, 3.5), SAMPLE_RATE, "mp3")
    assert prepare_reference(data).shape[0] == pytest.approx(3.5 * SAMPLE_RATE, rel=0.05)


def test_too_short_after_trimming(speech: Speech, to_wav: ToWav) -> None:
    # 7 s long, but only 2 s of it is speech.
    data = to_wav(_padded(speech, 16_000, 2.0, pad_seconds=2.5), 16_000)
    with pytest.raises(AudioInputError) as info:
        prepare_reference(data)
    message = str(info.value)
    assert "too short" in message and "2.1 s" in message and f"{REF_MIN_SECONDS:g} s" in message
    assert info.value.param == "reference_audio"


def test_too_long(speech: Speech, to_wav: ToWav) -> None:
    data = to_wav(speech(8_000, REF_MAX_SECONDS + 1.5), 8_000)
    with pytest.raises(AudioInputError, match=rf"too long: 31\.5 s .* at most {REF_MAX_SECONDS:g} s"):
        prepare_reference(data)


def test_limits_are_parameters(speech: Speech) -> None:
    wav = speech(16_000, 2.0)
    assert prepare_reference_array(wav, 16_000, min_seconds=1.0).shape[0] > 0
    with pytest.raises(AudioInputError, match=r"at most 1\.5 s"):
        prepare_reference_array(wav, 16_000, min_seconds=1.0, max_seconds=1.5)


def test_silent_clip(to_wav: ToWav) -> None:
    with pytest.raises(AudioInputError, match="silent: it has no signal, below the -60 dBFS minimum"):
        prepare_reference(to_wav(np.zeros(5 * 16_000, np.float32), 16_000))
    hiss = (10 ** (-70 / 20) * np.random.default_rng(0).standard_normal(5 * 16_000)).astype(np.float32)
    with pytest.raises(AudioInputError, match=r"silent: it has an RMS level of -70\.\d dBFS"):
        prepare_reference(to_wav(hiss, 16_000, subtype="FLOAT"))


def test_clipped_clip(speech: Speech, to_wav: ToWav) -> None:
    clipped = np.clip(speech(16_000, 4.0, level=1.0) * 3.0, -1.0, 1.0)
    with pytest.raises(AudioInputError) as info:
        prepare_reference(to_wav(clipped, 16_000))
    message = str(info.value)
    assert "clipped" in message and "% of samples at full scale" in message and "at most 1%" in message
    # A few isolated full-scale samples are fine.
    few = speech(16_000, 4.0, level=0.5)
    few[::1000] = 1.0
    assert prepare_reference(to_wav(few, 16_000)).shape[0] > 0


def test_garbage_upload_names_the_field() -> None:
    with pytest.raises(AudioInputError, match="could not decode the voice_sample as audio") as info:
        prepare_reference(b"not audio at all" * 10, param="voice_sample")
    assert info.value.param == "voice_sample"


def test_rejects_non_mono_array() -> None:
    with pytest.raises(ValueError, match="mono"):
        prepare_reference_array(np.zeros((100, 2), np.float32), 16_000)


def _recorded(name: str) -> tuple[np.ndarray, int]:
    import soundfile as sf

    wav, sr = sf.read(Path(__file__).parents[2] / "data" / name, dtype="float32")
    return wav, sr


@pytest.mark.parametrize("name", ["speech_en_female_16k.wav", "speech_en_male_16k.wav"])
@pytest.mark.parametrize("snr_db", [None, 5.0])
def test_recorded_speech_passes_the_voicing_check(name: str, snr_db: float | None) -> None:
    wav, sr = _recorded(name)
    if snr_db is not None:  # speech over white noise at 5 dB SNR is still speech
        power = float(np.mean(wav**2)) / 10 ** (snr_db / 10)
        wav = wav + np.sqrt(power) * np.random.default_rng(1).standard_normal(wav.shape[0]).astype(np.float32)
    seconds, share, spread = voicing(resample(wav, sr, SAMPLE_RATE), SAMPLE_RATE)
    assert seconds > 1.0 and 0.25 < share < 0.9 and spread > 0.5
    assert prepare_reference_array(wav, sr, min_seconds=2.0).shape[0] > 0


@pytest.mark.parametrize(
    ("signal", "expected"),
    [
        ("white noise", r"no voiced speech: 0\.0 s of its 6\.0 s is voiced, at least 0\.3 s needed"),
        ("sine 220 Hz", r"steady tone, not speech: voiced in 100% of frames at one pitch \(spread 0\.0\d"),
        ("mains hum", r"steady tone, not speech: voiced in 100% of frames"),
        ("square 110 Hz", r"steady tone, not speech"),
    ],
)
def test_noise_and_tones_are_not_voices(signal: str, expected: str, to_wav: ToWav) -> None:
    sr = 24_000
    t = np.arange(6 * sr) / sr
    noise = np.random.default_rng(0).standard_normal(t.shape[0])
    wav = {
        "white noise": 0.1 * noise,
        "sine 220 Hz": 0.3 * np.sin(2 * np.pi * 220 * t),
        "mains hum": 0.2 * np.sin(2 * np.pi * 50 * t) + 0.02 * noise,
        "square 110 Hz": 0.2 * np.sign(np.sin(2 * np.pi * 110 * t)),
    }[signal].astype(np.float32)
    with pytest.raises(AudioInputError, match=expected) as info:
        prepare_reference(to_wav(wav, sr), param="file")
    assert info.value.param == "file"
