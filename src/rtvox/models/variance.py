"""FastSpeech2's variance adaptor: duration, pitch and energy predictors, and the length regulator.

Representations (the training pipeline must produce targets in these units):
- duration: integer mel frames per phoneme (the trainer's monotonic alignment, or an external aligner); the
  predictor regresses log(1 + frames).
- pitch: per-phoneme mean of log-F0 over voiced frames, z-normalized with the speaker's mean and std over all
  their utterances (rtvox.training, `prosody_norm="speaker"`; models up to rtvox-small 2.0.0 used each
  utterance's own), so 0 is the voice's average and `pitch_scale` scales the deviation (0 = monotone,
  1 = as predicted, 2 = exaggerated intonation).
- energy: per-phoneme mean of the frame energy (mean log-mel), z-normalized the same way; `energy_scale`
  scales the deviation. Negative values are real (quieter than average): an inference-time clamp at 0, which
  the training targets never had, cost rtvox-small 2.0.0 13 points of English WER (docs/QUALITY.md).
Emotion prosody prior (`prosody` [B, 4] = pitch shift, pitch range ratio, energy shift, duration ratio;
identity row (0, 1, 0, 1)): a data-derived per-emotion correction applied explicitly at inference, because the
learned emotion conditioning moves the predictions only a fifth of the way the training data does
(rtvox.models.prosody). Durations are multiplied before the length regulator (so an exact target stays exact);
pitch becomes p + (range - 1)·(p - mean(p)) + shift (the identity row leaves p bit for bit), energy e + shift;
the user's pitch_scale / energy_scale apply after.
Both values are phoneme-level (one number per phoneme, not per frame), which keeps the adaptor a pure
function of [B, N] tensors, and are fed back through a small 1-D convolution of the scalar (FastPitch) rather
than FastSpeech2's bucketize + embedding, which has no ONNX/TensorRT-native equivalent.

The length regulator turns continuous predicted durations into integer frames with tensor ops only:
- free mode (target_frames == 0): round(frames / speed), at least 1 frame per real phoneme;
- exact mode (target_frames > 0): speed is ignored and durations are rescaled so the row sums to the target
  exactly, by largest remainder (floor, then +1 to the phonemes with the largest fractional parts, ties to the
  earlier phoneme). When the target allows, every real phoneme first gets one frame.
The ranking for the largest remainder is a pairwise comparison ([B, N, N], N <= a few hundred per chunk)
instead of a sort: deterministic on every backend and made of ops every exporter knows.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.constants import SPEED_MAX, SPEED_MIN
from rtvox.models.layers import ChannelLayerNorm, masked_fill_zero

# Added to every real phoneme's weight when fitting a target, so all-zero predictions still share frames.
_FIT_EPS = 1e-4
# Free-mode ceiling per phoneme (5.5 s): a diverging duration prediction cannot allocate a huge mel.
MAX_PHONEME_FRAMES = 512
# Ceiling on one batch's frame count (11.6 min per row; a request's exact target is at most 2 min). Told to
# the compilers so they can prove int32 indexing safe for data-dependent lengths.
MAX_FRAMES = 2**16


# ---------------------------------------------------------------------------------------------- modules
class VariancePredictor(nn.Module):
    """Two (conv → ReLU → channel LN → dropout) layers and a linear head: hidden [B, N, D] -> value [B, N]."""

    def __init__(self, dim: int, channels: int, kernel: int, dropout: float = 0.0) -> None:
        super().__init__()
        assert kernel % 2 == 1, "odd kernel keeps the length"
        self.conv1 = nn.Conv1d(dim, channels, kernel, padding=kernel // 2)
        self.norm1 = ChannelLayerNorm(channels)
        self.conv2 = nn.Conv1d(channels, channels, kernel, padding=kernel // 2)
        self.norm2 = ChannelLayerNorm(channels)
        self.head = nn.Linear(channels, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: [B, N, D], mask: Bool[B, N] -> [B, N], 0 at padding
        m = mask[:, None, :].to(x.dtype)  # [B, 1, N]
        h = masked_fill_zero(x, mask).transpose(1, 2)  # [B, D, N]
        h = self.dropout(self.norm1(F.relu(self.conv1(h)))) * m
        h = self.dropout(self.norm2(F.relu(self.conv2(h)))) * m
        return self.head(h.transpose(1, 2)).squeeze(-1) * m[:, 0]


class ValueEmbedding(nn.Module):
    """A phoneme-level scalar (pitch or energy) [B, N] -> additive embedding [B, N, D] (FastPitch style)."""

    def __init__(self, dim: int, kernel: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, dim, kernel, padding=kernel // 2)

    def forward(self, value: Tensor, mask: Tensor) -> Tensor:
        # value: [B, N], mask: Bool[B, N] -> [B, N, D], 0 at padding
        v = torch.where(mask, value, torch.zeros((), dtype=value.dtype, device=value.device))
        return masked_fill_zero(self.conv(v[:, None, :]).transpose(1, 2), mask)


class VarianceAdaptor(nn.Module):
    """Owns the three predictors and the pitch/energy embeddings; works at phoneme level on [B, N, D].

    `forward_train` uses teacher pitch/energy (teacher forcing) and returns the predictions for the losses;
    `infer` uses its own predictions, applies the prosody prior and the per-request scales and returns integer
    durations.
    """

    def __init__(
        self,
        dim: int,
        channels: int,
        kernel: int,
        dropout: float = 0.0,
        pitch_bounds: tuple[float, float] | None = None,
    ) -> None:
        super().__init__()
        self.pitch_bounds = pitch_bounds  # (low, high) speaker z the inferred pitch is clamped to; None: unbounded
        self.duration = VariancePredictor(dim, channels, kernel, dropout)
        self.pitch = VariancePredictor(dim, channels, kernel, dropout)
        self.energy = VariancePredictor(dim, channels, kernel, dropout)
        self.pitch_embed = ValueEmbedding(dim)
        self.energy_embed = ValueEmbedding(dim)

    def forward_train(
        self, x: Tensor, mask: Tensor, pitch: Tensor, energy: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        # x: [B, N, D], mask: Bool[B, N], pitch/energy: teacher values [B, N]
        # -> (x + embeddings [B, N, D], log_duration_pred [B, N], pitch_pred [B, N], energy_pred [B, N])
        log_dur = self.duration(x, mask)
        pitch_pred = self.pitch(x, mask)
        x = x + self.pitch_embed(pitch, mask)
        energy_pred = self.energy(x, mask)
        x = x + self.energy_embed(energy, mask)
        return x, log_dur, pitch_pred, energy_pred

    def infer(
        self,
        x: Tensor,
        mask: Tensor,
        speed: Tensor,
        target_frames: Tensor,
        pitch_scale: Tensor,
        energy_scale: Tensor,
        prosody: Tensor,
    ) -> tuple[Tensor, Tensor]:
        # x: [B, N, D], mask: Bool[B, N], speed/pitch_scale/energy_scale: Float[B], target_frames: Long[B],
        # prosody: Float[B, 4] (pitch shift, pitch range, energy shift, duration ratio)
        # -> (x + embeddings [B, N, D], durations Long[B, N])
        frames = torch.expm1(self.duration(x, mask)).clamp_min(0.0)  # [B, N] continuous frames at speed 1
        frames = frames * prosody[:, 3:4]
        durations = regulate_durations(frames, mask, speed, target_frames)
        pitch = self.pitch(x, mask)
        # (range - 1)·deviation, not (p - mean)·range + mean: the identity row then changes nothing, bit for bit
        pitch = pitch + (prosody[:, 1:2] - 1.0) * (pitch - masked_mean(pitch, mask)) + prosody[:, 0:1]
        pitch = pitch * pitch_scale[:, None]
        if self.pitch_bounds is not None:
            # the embedding never saw values outside the training range: beyond it speech breaks (surprised at ×2.5
            # range reached z ≈ 7 and lost words), so the prior and the request scale end at the trained range
            pitch = pitch.clamp(self.pitch_bounds[0], self.pitch_bounds[1])
        x = x + self.pitch_embed(pitch, mask)
        energy = (self.energy(x, mask) + prosody[:, 2:3]) * energy_scale[:, None]
        x = x + self.energy_embed(energy, mask)
        return x, durations


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """values: [B, N], mask: Bool[B, N] -> [B, 1] mean over each row's real positions (0 for an empty row)."""
    m = mask.to(values.dtype)
    return (values * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)


# ---------------------------------------------------------------------------------------------- durations
def free_durations(frames: Tensor, mask: Tensor, speed: Tensor) -> Tensor:
    """frames: Float[B, N] at speed 1, mask: Bool[B, N], speed: Float[B] -> Long[B, N]: round(frames / speed)
    in [1, MAX_PHONEME_FRAMES] for real phonemes, 0 for padding. Speed is clamped to [SPEED_MIN, SPEED_MAX].
    """
    speed = speed.to(frames.dtype).clamp(SPEED_MIN, SPEED_MAX)
    scaled = torch.round(frames / speed[:, None]).clamp_min(1.0).clamp_max(float(MAX_PHONEME_FRAMES)).long()
    return torch.where(mask, scaled, torch.zeros_like(scaled))


def remainder_rank(values: Tensor) -> Tensor:
    """values: Float[B, N] -> Long[B, N]: 0 for the largest value of each row, 1 for the next...; equal values
    are ranked by position (earlier first), so the result is a permutation of 0..N-1 and deterministic."""
    n = values.shape[1]
    idx = torch.arange(n, device=values.device)
    vi, vj = values[:, :, None], values[:, None, :]  # [B, N, 1], [B, 1, N]
    earlier = idx[None, None, :] < idx[None, :, None]  # [1, N, N]: j before i
    ahead = (vj > vi) | ((vj == vi) & earlier)  # [B, N, N]: j ranks ahead of i
    return ahead.sum(-1)


def fit_durations(frames: Tensor, mask: Tensor, target: Tensor) -> Tensor:
    """Integer durations in proportion to `frames` summing exactly to `target` (largest remainder).

    frames: Float[B, N] >= 0, mask: Bool[B, N], target: Long[B] -> Long[B, N], 0 at padding. If target >= the
    number of real phonemes each gets one frame and the rest is shared in proportion; otherwise the target
    is shared in proportion (some phonemes get 0). A row without real phonemes gets 0 frames.
    """
    target = target.long()
    n_real = mask.sum(1)  # Long[B]
    base = (target >= n_real).long()  # [B]: 1 frame per real phoneme first
    rest = (target - base * n_real).clamp_min(0)  # [B] frames left to share
    zero = torch.zeros((), dtype=frames.dtype, device=frames.device)
    weight = torch.where(mask, frames.clamp_min(0.0) + _FIT_EPS, zero)  # [B, N]
    total = weight.sum(1, keepdim=True).clamp_min(_FIT_EPS)  # [B, 1]
    share = rest[:, None].to(frames.dtype) * weight / total  # [B, N], sums to `rest` up to rounding
    floor = torch.floor(share)
    missing = rest - floor.long().sum(1)  # [B] in [0, n_real]: frames still to hand out
    remainder = torch.where(mask, share - floor, torch.full_like(share, -1.0))  # padding ranks last
    extra = remainder_rank(remainder) < missing[:, None]  # [B, N]
    fitted = base[:, None] + floor.long() + extra.long()
    return torch.where(mask, fitted, torch.zeros_like(fitted))


def regulate_durations(frames: Tensor, mask: Tensor, speed: Tensor, target_frames: Tensor) -> Tensor:
    """Per row: `fit_durations` when target_frames > 0, else `free_durations`. -> Long[B, N]."""
    free = free_durations(frames, mask, speed)
    fitted = fit_durations(frames, mask, target_frames)
    return torch.where(target_frames[:, None] > 0, fitted, free)


# ---------------------------------------------------------------------------------------------- expansion
def total_frames(durations: Tensor) -> int:
    """max over the batch of sum(durations): the data-dependent frame count of `length_regulate`.

    This is the one place the acoustic model reads a tensor value on the host. Under torch.export it becomes
    an unbacked SymInt (hence .item() and no int()). Compiled engines avoid it: they pass a frame mask of
    their bucket's length to `AcousticModel.decode_masked` (or `max_frames` to `decode`).
    """
    # At least one frame (silence for an all-empty batch) so no shape downstream is ever 0.
    n = cast(int, durations.sum(1).max().clamp_min(1).item())  # int eagerly, an unbacked SymInt in export
    torch._check(n >= 1)
    torch._check(n <= MAX_FRAMES)  # no message: torch.compile cannot trace a closure here
    return n


FRAME_POSITION_FEATURES = 5  # see frame_positions


def frame_positions(durations: Tensor, n_frames: int) -> Tensor:
    """Where each frame sits inside its phoneme: durations Long[B, N] -> [B, n_frames, 5] = (progress p in
    [0, 1), p², sin πp, cos πp, the phoneme's length / 32 frames); 0 past each row's end.

    The length regulator repeats one vector per phoneme, so without this the decoder can tell the frames of a
    syllable apart only from its edges; a Mandarin tone is a contour across them (rtvox.models.acoustic,
    config `frame_position`).
    """
    ends = torch.cumsum(durations, dim=1)  # [B, N]
    t = torch.arange(n_frames, device=durations.device)  # [T]
    index = (t[None, :, None] >= ends[:, None, :]).sum(-1).clamp_max(durations.shape[1] - 1)  # [B, T]
    length = torch.gather(durations, 1, index).clamp_min(1).float()  # [B, T]
    start = torch.gather(ends, 1, index).float() - length
    p = ((t[None, :].float() - start) / length).clamp(0.0, 1.0)
    angle = p * math.pi
    features = torch.stack([p, p * p, torch.sin(angle), torch.cos(angle), length / 32.0], dim=-1)
    inside = (t[None, :] < ends[:, -1:])[..., None]
    return features * inside.to(features.dtype)


def length_regulate(hidden: Tensor, durations: Tensor, n_frames: int) -> tuple[Tensor, Tensor, Tensor]:
    """Repeat each phoneme's vector durations[b, i] times along a frame axis of length n_frames.

    hidden: [B, N, D], durations: Long[B, N] (0 at padding) -> (frames [B, n_frames, D] zero past each row's
    end, frame_mask Bool[B, n_frames], lengths Long[B] = min(sum(durations), n_frames)).
    Frame t of row b comes from the phoneme i with cum[i-1] <= t < cum[i] (cum = cumsum of durations), found
    by counting the boundaries <= t: a [B, n_frames, N] comparison, no loop, no ragged lists.
    """
    ends = torch.cumsum(durations, dim=1)  # [B, N]
    lengths = ends[:, -1].clamp_max(n_frames)  # [B]
    t = torch.arange(n_frames, device=hidden.device)  # [T]
    index = (t[None, :, None] >= ends[:, None, :]).sum(-1)  # [B, T]: phoneme of each frame
    index = index.clamp_max(hidden.shape[1] - 1)
    frames = torch.gather(hidden, 1, index[:, :, None].expand(-1, -1, hidden.shape[2]))  # [B, T, D]
    frame_mask = t[None, :] < lengths[:, None]  # [B, T]
    return masked_fill_zero(frames, frame_mask), frame_mask, lengths
