"""Frame-level F0 estimation (YIN): shared by the training packer and the evaluation's emotion judge.

One estimate per mel hop, so F0 frames line up with the acoustic model's mel frames. The difference function
is computed for all frames at once through FFT cross-correlation, which keeps an hour of audio to seconds on
one core.
"""

from __future__ import annotations

import numpy as np
import torch

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE

F0_MIN_HZ, F0_MAX_HZ = 50.0, 700.0  # search range of the period: covers low male to child voices
YIN_THRESHOLD = 0.2  # first dip of the normalized difference under this is the period
VOICED_MAX_DEPTH = 0.35  # a frame whose best dip stays above this is unvoiced (aperiodic)
VOICED_MIN_DB = -35.0  # frames quieter than the loudest frame by more than this are unvoiced
WINDOW = 1024
_FFT = 2048
_DIP_SEARCH = 24  # samples after the first crossing scanned for the bottom of the dip


def frame_f0(wav: np.ndarray, n_frames: int, sample_rate: int = SAMPLE_RATE, hop: int = HOP_LENGTH) -> np.ndarray:
    """YIN-style F0 per hop frame (cumulative-mean-normalized difference, first dip under a threshold,
    refined to the local minimum): float32 [n_frames] in Hz, 0 where unvoiced.

    Frame k is centred on sample k·hop, as the mel frames of `rtvox.audio.mel` are.
    """
    win = WINDOW
    tau_min, tau_max = int(sample_rate / F0_MAX_HZ), min(int(sample_rate / F0_MIN_HZ), win // 2)
    width = win - tau_max
    x = torch.from_numpy(np.pad(np.asarray(wav, dtype=np.float32), (win // 2, win // 2 + hop)))
    frames = x.unfold(0, win, hop)[:n_frames].double()  # [F, win]
    if frames.shape[0] == 0:
        return np.zeros(0, np.float32)
    spec_a = torch.fft.rfft(frames[:, :width], n=_FFT)
    spec_b = torch.fft.rfft(frames, n=_FFT)
    corr = torch.fft.irfft(spec_a.conj() * spec_b, n=_FFT)[:, : tau_max + 1]  # r(tau): [F, tau_max+1]
    sq = torch.cat([torch.zeros(frames.shape[0], 1, dtype=frames.dtype), frames.square().cumsum(1)], 1)
    taus = torch.arange(tau_max + 1)
    e0 = sq[:, width : width + 1]
    e_tau = sq[:, taus + width] - sq[:, taus]
    diff = (e0 + e_tau - 2 * corr).clamp_min(0)  # d(tau) = Σ (x[t] - x[t+tau])²
    cum = diff[:, 1:].cumsum(1) / torch.arange(1, tau_max + 1)
    cmnd = torch.ones_like(diff)
    cmnd[:, 1:] = diff[:, 1:] / cum.clamp_min(1e-12)
    search = cmnd.clone()
    search[:, :tau_min] = 2.0
    below = search < YIN_THRESHOLD
    first = torch.where(below.any(1), below.float().argmax(1), search.argmin(1))
    # The first crossing lies on the dip's falling edge; the period is the bottom of that dip.
    idx = (first[:, None] + torch.arange(_DIP_SEARCH)[None]).clamp_max(tau_max)
    local = torch.gather(search, 1, idx)
    tau = torch.gather(idx, 1, local.argmin(1, keepdim=True))[:, 0]
    depth = torch.gather(search, 1, tau[:, None])[:, 0]
    rms = frames[:, win // 4 : 3 * win // 4].square().mean(1).sqrt()
    voiced = (depth < VOICED_MAX_DEPTH) & (rms > rms.max() * 10 ** (VOICED_MIN_DB / 20))
    f0 = torch.where(voiced, sample_rate / tau.double(), torch.zeros_like(rms))
    return f0.float().numpy()
