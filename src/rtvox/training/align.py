"""Learned phoneme-to-frame alignment for training the duration predictor without an external aligner.

The aligner scores every (frame, phoneme) pair by the distance between a mel-frame query and a phoneme key
(after RAD-TTS / "One TTS Alignment To Rule Them All", Badlani et al. 2022): a soft alignment trained with the
forward-sum (CTC) objective over all monotonic paths, then the single best monotonic path (Viterbi, "MAS")
gives integer durations that sum exactly to the mel length. Those durations feed the length regulator and
the duration predictor; per-phoneme pitch and energy are averaged over each phoneme's frames.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

try:  # numba makes the Viterbi pass ~100x faster; the numpy path is the reference and the fallback
    import numba

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the machine
    _HAVE_NUMBA = False

NEG = -1e4  # "impossible" log-probability that stays finite in bf16 and under CTC


class Aligner(nn.Module):
    """(phoneme ids [B, N], log-mel [B, 80, T]) -> attention logits [B, T, N] (negative scaled distances)."""

    def __init__(self, vocab_size: int, n_mels: int = 80, dim: int = 256, att_dim: int = 80) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.key = nn.Sequential(nn.Conv1d(dim, dim * 2, 3, padding=1), nn.ReLU(), nn.Conv1d(dim * 2, att_dim, 1))
        self.query = nn.Sequential(
            nn.Conv1d(n_mels, n_mels * 2, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(n_mels * 2, n_mels, 1),
            nn.ReLU(),
            nn.Conv1d(n_mels, att_dim, 1),
        )
        self.temperature = 0.0005

    def forward(self, ids: Tensor, mel: Tensor) -> Tensor:
        keys = self.key(self.embed(ids).transpose(1, 2)).float()  # [B, A, N]
        queries = self.query(mel).float()  # [B, A, T]
        # squared distance via |q|² + |k|² - 2 q·k, without a [B, A, T, N] intermediate
        dist = (
            queries.square().sum(1)[:, :, None] + keys.square().sum(1)[:, None, :] - 2 * queries.transpose(1, 2) @ keys
        )
        return -self.temperature * dist  # [B, T, N]


def diagonal_prior(ph_len: Tensor, mel_len: Tensor, n_max: int, t_max: int, width: float = 0.12) -> Tensor:
    """Log of a Gaussian band around the diagonal of each (T_b, N_b) grid: [B, T, N]. It only steers the
    early steps; `width` is in units of the whole utterance."""
    t = torch.arange(t_max, device=ph_len.device, dtype=torch.float32)[None, :, None] + 0.5
    n = torch.arange(n_max, device=ph_len.device, dtype=torch.float32)[None, None, :] + 0.5
    rel = t / mel_len[:, None, None].float() - n / ph_len[:, None, None].float()
    return -0.5 * (rel / width).square()


def masked_log_softmax(logits: Tensor, ph_mask: Tensor) -> Tensor:
    return torch.log_softmax(logits.masked_fill(~ph_mask[:, None, :], NEG), dim=-1)


def forward_sum_loss(logits: Tensor, ph_len: Tensor, mel_len: Tensor) -> Tensor:
    """CTC over all monotonic alignments in which every phoneme gets ≥ 1 frame; mean over the batch.

    `logits` must be log-probabilities over the phonemes of each frame (masked_log_softmax, prior included):
    the blank class sits at a fixed -1 beside them, so it only wins frames where no phoneme is likely. Raw
    aligner energies (-temperature·distance, far below -1) let the blank take every frame and the aligner
    never has to tell phonemes apart: the first trained models (2026-12-02/03) collapsed that way."""
    b, _t_max, n_max = logits.shape
    ph_mask = torch.arange(n_max, device=logits.device)[None] < ph_len[:, None]
    padded = F.pad(logits.masked_fill(~ph_mask[:, None, :], NEG), (1, 0), value=-1.0)  # class 0 = blank
    log_probs = torch.log_softmax(padded, dim=-1).transpose(0, 1)  # [T, B, N + 1]
    targets = torch.arange(1, n_max + 1, device=logits.device)[None].expand(b, n_max)
    return F.ctc_loss(log_probs, targets, mel_len, ph_len, blank=0, reduction="mean", zero_infinity=True)


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


def binarization_loss(log_attn: Tensor, path: Tensor) -> Tensor:
    """-mean log soft-attention on the hard path: pulls the soft alignment towards the chosen path."""
    picked = log_attn.masked_select(path)
    return -picked.clamp_min(NEG).mean()


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


def align_batch(
    aligner: Aligner,
    ids: Tensor,
    mel: Tensor,
    ph_len: Tensor,
    mel_len: Tensor,
    ph_mask: Tensor,
    prior_width: float = 0.12,
) -> tuple[Tensor, Tensor, Tensor]:
    """The trainer's alignment step: (forward-sum loss, log attention [B, T, N] with the diagonal prior of
    `prior_width`, best monotonic durations Long[B, N])."""
    logits = aligner(ids, mel)
    logits = logits + diagonal_prior(ph_len, mel_len, logits.shape[2], logits.shape[1], prior_width)
    log_attn = masked_log_softmax(logits, ph_mask)
    return forward_sum_loss(log_attn, ph_len, mel_len), log_attn, monotonic_durations(log_attn, ph_len, mel_len)
