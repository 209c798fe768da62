from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rtvox.audio.mel import LOG_MEL_FLOOR, ConvSTFT, MelSpectrogram, hz_to_mel, mel_filterbank, mel_to_hz
from rtvox.constants import HOP_LENGTH, MEL_FMAX, MEL_FMIN, N_FFT, N_MELS, SAMPLE_RATE, WIN_LENGTH

Speech = Callable[..., np.ndarray]


@pytest.mark.parametrize(
    ("sr", "n_fft", "n_mels", "fmin", "fmax"),
    [
        (SAMPLE_RATE, N_FFT, N_MELS, MEL_FMIN, MEL_FMAX),
        (16_000, 400, 40, 0.0, 8_000.0),
        (22_050, 1024, 80, 50, 8_000),
    ],
)
def test_filterbank_matches_librosa(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> None:
    librosa = pytest.importorskip("librosa")
    ours = mel_filterbank(sr, n_fft, n_mels, fmin, fmax)
    theirs = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)
    assert ours.shape == theirs.shape == (n_mels, n_fft // 2 + 1)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


def test_mel_scale_is_slaney_and_invertible() -> None:
    hz = np.array([0.0, 500.0, 1000.0, 4000.0, 12000.0])
    np.testing.assert_allclose(mel_to_hz(hz_to_mel(hz)), hz, rtol=1e-12, atol=1e-9)
    assert hz_to_mel(np.array(1000.0)) == pytest.approx(15.0)  # linear part: 1000 Hz / (200/3)


def test_filterbank_rejects_bad_band() -> None:
    with pytest.raises(ValueError, match="fmax"):
        mel_filterbank(16_000, 400, 40, 0.0, 9_000.0)


@pytest.mark.parametrize(
    ("n_fft", "win_length", "hop"), [(N_FFT, WIN_LENGTH, HOP_LENGTH), (400, 400, 160), (512, 320, 80)]
)
def test_conv_stft_matches_torch_stft(n_fft: int, win_length: int, hop: int, speech: Speech) -> None:
    wav = torch.from_numpy(speech(16_000, 0.5))[None]
    ours = ConvSTFT(n_fft, win_length, hop)(wav)
    spec = torch.stft(
        wav, n_fft, hop, win_length, window=torch.hann_window(win_length), center=False, return_complex=True
    )
    theirs = spec.abs() ** 2
    assert ours.shape == theirs.shape
    assert ours.shape[-1] == ConvSTFT(n_fft, win_length, hop).num_frames(wav.shape[-1])
    torch.testing.assert_close(ours, theirs, rtol=1e-3, atol=1e-4 * float(theirs.max()))


@pytest.mark.parametrize("n_hops", [2, 3, 10, 94])
def test_frame_count_is_samples_over_hop(n_hops: int) -> None:
    wav = torch.randn(2, n_hops * HOP_LENGTH) * 0.1
    mel = MelSpectrogram()(wav)
    assert mel.shape == (2, N_MELS, n_hops)


def test_matches_hifigan_style_reference(speech: Speech) -> None:
    """Same recipe written with torch.stft: reflect pad, magnitude, Slaney mel, log(clamp)."""
    wav = torch.from_numpy(speech(SAMPLE_RATE, 1.0))[None]
    pad = (N_FFT - HOP_LENGTH) // 2
    padded = F.pad(wav[:, None], (pad, pad), mode="reflect")[:, 0]
    spec = torch.stft(
        padded,
        N_FFT,
        HOP_LENGTH,
        WIN_LENGTH,
        torch.hann_window(WIN_LENGTH),
        center=False,
        return_complex=True,
    )
    magnitude = torch.sqrt(spec.real**2 + spec.imag**2 + 1e-9)
    basis = torch.from_numpy(mel_filterbank(SAMPLE_RATE, N_FFT, N_MELS, MEL_FMIN, MEL_FMAX))
    reference = torch.log(torch.clamp(basis @ magnitude, min=LOG_MEL_FLOOR))
    torch.testing.assert_close(MelSpectrogram()(wav), reference, rtol=1e-4, atol=2e-3)


def test_batch_items_are_independent(speech: Speech) -> None:
    a, b = speech(SAMPLE_RATE, 0.5, seed=1), speech(SAMPLE_RATE, 0.5, seed=2, level=0.05)
    module = MelSpectrogram()
    batch = module(torch.from_numpy(np.stack([a, b])))
    torch.testing.assert_close(batch[1:], module(torch.from_numpy(b)[None]), rtol=1e-5, atol=1e-5)


def test_silence_floor_and_tone_bin() -> None:
    module = MelSpectrogram()
    silent = module(torch.zeros(1, 10 * HOP_LENGTH))
    torch.testing.assert_close(silent, torch.full_like(silent, float(np.log(LOG_MEL_FLOOR))))
    t = torch.arange(40 * HOP_LENGTH) / SAMPLE_RATE
    tone = module(torch.sin(2 * torch.pi * 1000.0 * t)[None])
    peak_bin = int(tone[0, :, 20].argmax())
    centers = mel_to_hz(np.linspace(hz_to_mel(np.array(MEL_FMIN)), hz_to_mel(np.array(MEL_FMAX)), N_MELS + 2))[1:-1]
    assert abs(centers[peak_bin] - 1000.0) < 80.0


def test_buffers_are_not_state() -> None:
    assert MelSpectrogram().state_dict() == {}


def test_exports_with_torch_export() -> None:
    module = MelSpectrogram().eval()
    wav = torch.randn(1, 8 * HOP_LENGTH) * 0.1
    exported = torch.export.export(module, (wav,))
    torch.testing.assert_close(exported.module()(wav), module(wav))
