"""Mel spectrograms in torch: the Slaney mel filterbank, a convolutional STFT, and the project's log-mel.

The STFT is a strided `conv1d` whose kernels are windowed cosines and sines, not `torch.stft`: a plain
convolution exports to ONNX and TensorRT (and compiles) everywhere, while complex-valued STFT support varies
by exporter and backend. It matches `torch.stft` to float32 rounding (tested). The filterbank is built here
in numpy so nothing depends on librosa at run time; it equals `librosa.filters.mel(htk=False,
norm="slaney")`, the filters HiFi-GAN and resemblyzer were trained with.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.constants import HOP_LENGTH, MEL_FMAX, MEL_FMIN, N_FFT, N_MELS, SAMPLE_RATE, WIN_LENGTH

# Slaney's mel scale (Auditory Toolbox): linear below 1 kHz at 200/3 Hz per mel, logarithmic above.
_SLANEY_HZ_PER_MEL = 200.0 / 3.0
_SLANEY_LOG_START_HZ = 1000.0
_SLANEY_LOG_STEP = float(np.log(6.4) / 27.0)
# log(clamp(x, 1e-5)) floors silence at about -11.5, as HiFi-GAN does.
LOG_MEL_FLOOR = 1e-5
# Added under the square root so the magnitude has a finite gradient at exact zeros.
_MAGNITUDE_EPS = 1e-9


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney mel scale (librosa's default, htk=False)."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = hz / _SLANEY_HZ_PER_MEL
    log_start_mel = _SLANEY_LOG_START_HZ / _SLANEY_HZ_PER_MEL
    above = hz >= _SLANEY_LOG_START_HZ
    safe_hz = np.where(above, hz, _SLANEY_LOG_START_HZ)
    return np.where(above, log_start_mel + np.log(safe_hz / _SLANEY_LOG_START_HZ) / _SLANEY_LOG_STEP, mel)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    """Inverse of `hz_to_mel`."""
    mel = np.asarray(mel, dtype=np.float64)
    log_start_mel = _SLANEY_LOG_START_HZ / _SLANEY_HZ_PER_MEL
    above = mel >= log_start_mel
    return np.where(
        above,
        _SLANEY_LOG_START_HZ * np.exp(_SLANEY_LOG_STEP * (mel - log_start_mel)),
        mel * _SLANEY_HZ_PER_MEL,
    )


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """Triangular filters on the Slaney mel scale, area-normalized ("slaney" norm): [n_mels, n_fft//2 + 1].

    Filter i rises from band edge i to the peak at edge i+1 and falls to edge i+2, the n_mels + 2 edges
    being evenly spaced in mel between fmin and fmax. Each filter is scaled by 2 / (its width in Hz) so all
    have equal area and a wide high band does not outweigh a narrow low one.
    """
    if not 0.0 <= fmin < fmax <= sample_rate / 2:
        raise ValueError(f"need 0 <= fmin < fmax <= sample_rate/2, got fmin={fmin}, fmax={fmax}")
    fft_hz = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    edges_hz = mel_to_hz(np.linspace(hz_to_mel(np.array(fmin)), hz_to_mel(np.array(fmax)), n_mels + 2))
    widths = np.diff(edges_hz)  # [n_mels + 1]
    # distance[i, k] = edge i - fft bin k, in Hz: [n_mels + 2, n_freq]
    distance = edges_hz[:, None] - fft_hz[None, :]
    rising = -distance[:-2] / widths[:-1, None]
    falling = distance[2:] / widths[1:, None]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    filters *= (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None]
    return filters.astype(np.float32)


def hann_window(length: int) -> np.ndarray:
    """Periodic Hann window (as torch.hann_window and scipy's fftbins=True), float64."""
    k = np.arange(length, dtype=np.float64)
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * k / length)


class ConvSTFT(nn.Module):
    """Power spectrogram |STFT|^2 of already padded audio, as one strided convolution.

    Owns the windowed DFT kernels (a non-persistent buffer, rebuilt from the sizes, never saved with weights).
    Frames start every `hop_length` samples with no implicit centering: callers pad as their model expects.
    """

    kernels: Tensor  # [2 * n_freq, 1, n_fft]: cosines then sines, windowed

    def __init__(self, n_fft: int, win_length: int, hop_length: int) -> None:
        super().__init__()
        if win_length > n_fft:
            raise ValueError(f"win_length ({win_length}) must not exceed n_fft ({n_fft})")
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.n_freq = n_fft // 2 + 1
        # A window shorter than n_fft sits in the middle of the frame, as torch.stft and librosa place it.
        window = np.zeros(n_fft)
        offset = (n_fft - win_length) // 2
        window[offset : offset + win_length] = hann_window(win_length)
        angle = 2.0 * np.pi * np.outer(np.arange(self.n_freq), np.arange(n_fft)) / n_fft  # [F, n_fft]
        kernels = np.concatenate([np.cos(angle) * window, -np.sin(angle) * window])  # [2F, n_fft]
        self.register_buffer("kernels", torch.from_numpy(kernels.astype(np.float32)[:, None, :]), persistent=False)

    def num_frames(self, n_samples: int) -> int:
        """Frames produced from `n_samples` padded samples."""
        return 0 if n_samples < self.n_fft else 1 + (n_samples - self.n_fft) // self.hop_length

    def forward(self, wav: Tensor) -> Tensor:
        # wav: [B, T_padded] -> power: [B, n_freq, frames]
        spec = F.conv1d(wav.unsqueeze(1), self.kernels, stride=self.hop_length)  # [B, 2F, frames]
        real, imag = spec[:, : self.n_freq], spec[:, self.n_freq :]
        return real * real + imag * imag


class MelSpectrogram(nn.Module):
    """Log-mel spectrogram of 24 kHz audio: the acoustic model's target and the vocoder's input.

    HiFi-GAN convention: reflect-pad (n_fft - hop) / 2 on both sides instead of centering, STFT magnitude
    (not power), Slaney mel filters, natural log of the mel energies clamped at 1e-5. Audio of T samples (a
    multiple of the hop) gives exactly T // hop frames, so the vocoder's upsampling by the hop lines up
    sample for sample. Defaults are the project constants.
    """

    mel_basis: Tensor  # [n_mels, n_freq]

    def __init__(
        self,
        sample_rate: int = SAMPLE_RATE,
        n_fft: int = N_FFT,
        win_length: int = WIN_LENGTH,
        hop_length: int = HOP_LENGTH,
        n_mels: int = N_MELS,
        fmin: float = MEL_FMIN,
        fmax: float = MEL_FMAX,
    ) -> None:
        super().__init__()
        if (n_fft - hop_length) % 2:
            raise ValueError(f"n_fft - hop_length must be even to pad both sides alike, got {n_fft - hop_length}")
        self.hop_length = hop_length
        self.pad = (n_fft - hop_length) // 2
        self.stft = ConvSTFT(n_fft, win_length, hop_length)
        basis = torch.from_numpy(mel_filterbank(sample_rate, n_fft, n_mels, fmin, fmax))
        self.register_buffer("mel_basis", basis, persistent=False)

    def forward(self, wav: Tensor) -> Tensor:
        # wav: [B, T] with T > (n_fft - hop) / 2 (reflection needs that much signal) -> [B, n_mels, T // hop]
        padded = F.pad(wav.unsqueeze(1), (self.pad, self.pad), mode="reflect").squeeze(1)  # [B, T + 2 * pad]
        magnitude = torch.sqrt(self.stft(padded) + _MAGNITUDE_EPS)  # [B, n_freq, frames]
        mel = torch.matmul(self.mel_basis, magnitude)  # [B, n_mels, frames]
        return torch.log(torch.clamp(mel, min=LOG_MEL_FLOOR))
