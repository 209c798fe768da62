"""Learned phoneme-to-frame alignment for training the duration predictor without an external aligner.

Hard-EM monotonic alignment search, as Glow-TTS and Grad-TTS train their encoders (Kim et al. 2020; Popov et
al. 2021): a small text encoder predicts, for every phoneme, the mean of the (per-utterance normalized) log-mel
frames it covers; each frame's Gaussian log-likelihood under each phoneme's mean scores the (frame, phoneme)
grid; the best monotonic path through it (Viterbi, "MAS", plus a weak diagonal prior) gives integer durations
that sum exactly to the mel length; the encoder is trained by the squared error of the frames against the
means along that path. Those durations feed the length regulator and the duration predictor; per-phoneme
pitch and energy are averaged over each phoneme's frames.

The first aligner here was RAD-TTS's (learned mel queries against phoneme keys, forward-sum CTC loss). On the
real corpus it never became diagonal: its learned query space let a few "hub" phonemes win tens of frames
each. With the mel itself as the query there is no space to collapse into (recipes/train/README.md has the
measurements).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

try:  # numba makes the Viterbi pass ~100x faster; the numpy path is the reference and the fallback
    import numba

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the machine
    _HAVE_NUMBA = False

NEG = -1e4  # "impossible" log-probability that stays finite in bf16 and under CTC


class Aligner(nn.Module):
    """(phoneme ids [B, N], mask [B, N], speaker embedding [B, S]) -> predicted normalized mel per phoneme
    [B, n_mels, N]: embeddings + a speaker offset, residual convolutions with layer norm, a 1x1 projection.

    Measured on the 3.6 h corpus (recipes/train/README.md): kernel 3 gives plausible Mandarin durations;
    kernel 1 (no context: one mean per phoneme and voice) cannot fit coarticulation and misplaces whole
    syllables; kernel 5 lets a phoneme's mean drift to its neighbour's frames (initials 30 frames long)."""

    def __init__(
        self,
        vocab_size: int,
        n_mels: int = 80,
        dim: int = 192,
        layers: int = 3,
        speaker_dim: int = 256,
        kernel: int = 3,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.speaker = nn.Linear(speaker_dim, dim)
        self.convs = nn.ModuleList(nn.Conv1d(dim, dim, kernel, padding=kernel // 2) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))
        self.out = nn.Conv1d(dim, n_mels, 1)

    def forward(self, ids: Tensor, ph_mask: Tensor, speaker: Tensor) -> Tensor:
        h = (self.embed(ids) + self.speaker(speaker)[:, None, :]).transpose(1, 2)
        keep = ph_mask[:, None, :].to(h.dtype)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = h + torch.relu(conv(h))
            h = norm(h.transpose(1, 2)).transpose(1, 2) * keep
        return self.out(h)


def normalize_mel(mel: Tensor, frame_mask: Tensor) -> Tensor:
    """Zero mean, unit variance per mel channel over each utterance's real frames (removes most of a voice's
    and a recording's average spectrum); 0 at padding. mel [B, M, T], frame_mask [B, T]."""
    w = frame_mask[:, None, :].to(mel.dtype)
    count = w.sum(2, keepdim=True).clamp_min(1.0)
    mean = (mel * w).sum(2, keepdim=True) / count
    std = ((mel - mean).square() * w).sum(2, keepdim=True).div(count).sqrt() + 1e-3
    return (mel - mean) / std * w


def gaussian_loglik(x: Tensor, means: Tensor) -> Tensor:
    """-½‖x_t - μ_n‖² for every frame and phoneme: x [B, M, T], means [B, M, N] -> [B, T, N] (float32)."""
    with torch.autocast(x.device.type, enabled=False):
        x, means = x.float(), means.float()
        return -0.5 * (
            x.square().sum(1)[:, :, None] + means.square().sum(1)[:, None, :] - 2 * x.transpose(1, 2) @ means
        )


def diagonal_prior(ph_len: Tensor, mel_len: Tensor, n_max: int, t_max: int, width: float = 0.05) -> Tensor:
    """Log of a Gaussian band around the diagonal of each (T_b, N_b) grid: [B, T, N]. `width` is in units of
    the whole utterance; next to the likelihood's scale (tens per frame once trained) it only steers the
    first steps and keeps the path off absurd corners."""
    t = torch.arange(t_max, device=ph_len.device, dtype=torch.float32)[None, :, None] + 0.5
    n = torch.arange(n_max, device=ph_len.device, dtype=torch.float32)[None, None, :] + 0.5
    rel = t / mel_len[:, None, None].float() - n / ph_len[:, None, None].float()
    return -0.5 * (rel / width).square()


def _backtrack(came_from_prev: np.ndarray, n: int, t: int) -> np.ndarray:
    # came_from_prev: Bool[T, N] (the best path into (i, j) came from phoneme j - 1) -> durations [N]
    durations = np.zeros(n, dtype=np.int64)
    j = n - 1
    for i in range(t - 1, -1, -1):
        durations[j] += 1
        if i > 0 and came_from_prev[i, j]:
            j -= 1
    return durations


def _forward_numpy(logp: np.ndarray, n: int, t: int) -> np.ndarray:
    # logp: [T, N] -> Bool[T, N] back-pointers of the best monotonic paths from (0, 0)
    score = np.full((t, n), -np.inf)
    came_from_prev = np.zeros((t, n), dtype=bool)
    score[0, 0] = logp[0, 0]
    for i in range(1, t):
        stay = score[i - 1, :n]
        move = np.concatenate([[-np.inf], score[i - 1, : n - 1]])
        came_from_prev[i] = move > stay
        score[i] = np.maximum(stay, move) + logp[i, :n]
    return came_from_prev


def _viterbi_numpy(logp: np.ndarray, n: int, t: int) -> np.ndarray:
    """Durations [N] of the best monotonic path from (0, 0) to (t-1, n-1) through logp [T, N]."""
    return _backtrack(_forward_numpy(logp, n, t), n, t)


if _HAVE_NUMBA:

    @numba.njit(cache=False)  # type: ignore[misc,unused-ignore]
    def _forward_numba(logp: np.ndarray, n: int, t: int) -> np.ndarray:  # pragma: no cover - same as numpy path
        score = np.full((t, n), -np.inf)
        back = np.zeros((t, n), dtype=np.bool_)
        score[0, 0] = logp[0, 0]
        for i in range(1, t):
            for j in range(n):
                stay = score[i - 1, j]
                move = score[i - 1, j - 1] if j > 0 else -np.inf
                if move > stay:
                    score[i, j] = move + logp[i, j]
                    back[i, j] = True
                else:
                    score[i, j] = stay + logp[i, j]
        return back

    def _viterbi_numba(logp: np.ndarray, n: int, t: int) -> np.ndarray:  # pragma: no cover - machine-dependent
        return _backtrack(_forward_numba(logp, n, t), n, t)


def monotonic_durations(log_attn: Tensor, ph_len: Tensor, mel_len: Tensor) -> Tensor:
    """Best monotonic path per row -> Long[B, N] durations (≥ 1 for every real phoneme when T ≥ N, row sums
    = mel lengths, 0 at padding)."""
    logp = log_attn.detach().float().cpu().numpy()
    out = np.zeros(logp.shape[0:1] + logp.shape[2:], dtype=np.int64)
    fn = _viterbi_numba if _HAVE_NUMBA else _viterbi_numpy
    for row, (n, t) in enumerate(zip(ph_len.tolist(), mel_len.tolist(), strict=True)):
        out[row, :n] = fn(np.ascontiguousarray(logp[row, :t, :n]), n, t)
    return torch.from_numpy(out).to(log_attn.device)


def hard_alignment(durations: Tensor, t_max: int) -> Tensor:
    """Durations Long[B, N] -> one-hot path Bool[B, T, N]."""
    ends = durations.cumsum(1)  # [B, N]
    t = torch.arange(t_max, device=durations.device)[None, :, None]
    return (t < ends[:, None, :]) & (t >= (ends - durations)[:, None, :])


def phoneme_average(values: Tensor, weights: Tensor, path: Tensor) -> Tensor:
    """Weighted mean of frame values over each phoneme's frames: values/weights [B, T], path Bool[B, T, N]
    -> [B, N] (0 where a phoneme has no weighted frame)."""
    p = path.to(values.dtype)
    total = torch.einsum("bt,btn->bn", values * weights, p)
    count = torch.einsum("bt,btn->bn", weights, p)
    return torch.where(count > 0, total / count.clamp_min(1e-6), torch.zeros_like(total))


def utterance_zscore(values: Tensor, mask: Tensor) -> Tensor:
    """(values - mean) / std over the masked frames of each row; 0 outside the mask. values/mask [B, T]."""
    w = mask.to(values.dtype)
    count = w.sum(1, keepdim=True).clamp_min(1.0)
    mean = (values * w).sum(1, keepdim=True) / count
    var = ((values - mean).square() * w).sum(1, keepdim=True) / count
    return torch.where(mask, (values - mean) / var.add(1e-4).sqrt(), torch.zeros_like(values))


def log_duration_stats(durations: Tensor) -> float:
    """Mean log(1 + frames) of real phonemes (for logging)."""
    real = durations[durations > 0].float()
    return float(torch.log1p(real).mean()) if real.numel() else math.nan


def flat_start_width(step: int, final: float, flat_steps: int = 1500, ramp_steps: int = 2500) -> float:
    """Prior width at a training step: a near-uniform segmentation first (HMM-style "flat start": the means
    are learned from evenly split utterances before the path may wander), then a linear ramp to `final`."""
    flat = 0.005
    if step < flat_steps:
        return flat
    return min(final, flat + (step - flat_steps) / max(ramp_steps, 1) * (final - flat))


def align_batch(
    aligner: Aligner,
    ids: Tensor,
    mel: Tensor,
    ph_len: Tensor,
    mel_len: Tensor,
    ph_mask: Tensor,
    frame_mask: Tensor,
    speaker: Tensor,
    prior_width: float = 0.05,
) -> tuple[Tensor, Tensor]:
    """The trainer's alignment step: (the aligner's loss, best monotonic durations Long[B, N]).

    The loss is the mean squared error per mel channel of the normalized frames against their phoneme's
    predicted mean along the chosen path (the Gaussian negative log-likelihood up to constants)."""
    x = normalize_mel(mel.float(), frame_mask)
    means = aligner(ids, ph_mask, speaker).float()
    loglik = gaussian_loglik(x, means)
    with torch.no_grad():
        prior = diagonal_prior(ph_len, mel_len, loglik.shape[2], loglik.shape[1], prior_width)
        durations = monotonic_durations(loglik + prior, ph_len, mel_len)
        path = (hard_alignment(durations, x.shape[2]) & frame_mask[:, :, None]).float()
    with torch.autocast(x.device.type, enabled=False):
        expanded = means @ path.transpose(1, 2)  # [B, M, T]
        err = (x - expanded).square().sum(1) * frame_mask
        loss = err.sum() / (frame_mask.sum().clamp_min(1) * x.shape[1])
    return loss, durations
