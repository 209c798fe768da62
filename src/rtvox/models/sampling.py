"""Batched, seedable token sampling that never leaves the device (no `.item()`, no host RNG per row).

Every row has its own temperature, top-k, top-p, repetition penalty and seed, as tensors. Randomness is
Gumbel-max with noise from a counter-based hash of (seed, step, token id) (SplitMix64 finalizer in int64
arithmetic), so a request draws the same tokens whatever batch it runs in and whenever it joins: continuous
batching stays reproducible, and the step is CUDA-graph friendly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

_MIX1 = -4658895280553007687  # 0xbf58476d1ce4e5b9 as a signed int64
_MIX2 = -7723592293110705685  # 0x94d049bb133111eb
_GOLDEN = -7046029254386353131  # 0x9e3779b97f4a7c15
_MANTISSA = (1 << 53) - 1


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling settings (the API's fields); temperature 0 = greedy."""

    temperature: float = 0.8
    top_k: int = 50  # 0 = no limit
    top_p: float = 0.9  # 1 = no limit
    repetition_penalty: float = 1.1  # 1 = off; divides positive logits (multiplies negative) of tokens seen
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be ≥ 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be ≥ 0 (0 = off), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")


def _splitmix(x: Tensor) -> Tensor:
    # int64 wraps on overflow in torch; arithmetic shifts instead of logical ones still mix every bit
    x = (x ^ (x >> 30)) * _MIX1
    x = (x ^ (x >> 27)) * _MIX2
    return x ^ (x >> 31)


def uniform_noise(seeds: Tensor, steps: Tensor, vocab: int) -> Tensor:
    """U(0, 1) [B, V] from Long seeds [B] and steps [B]: a pure function of (seed, step, token)."""
    token = torch.arange(vocab, device=seeds.device, dtype=torch.int64)
    x = _splitmix(seeds * _GOLDEN + steps)[:, None] * _GOLDEN + token[None]
    bits = _splitmix(x) & _MANTISSA
    u = (bits.to(torch.float64) + 0.5).div(float(1 << 53)).to(torch.float32)
    return u.clamp(1e-12, 1.0 - 2.0**-24)  # float32 rounding must not reach 1 (−log(−log 1) = inf)


def apply_repetition_penalty(logits: Tensor, seen: Tensor, penalty: Tensor) -> Tensor:
    """logits [B, V], seen Bool[B, V], penalty [B] (CTRL's rule: divide positive, multiply negative)."""
    p = penalty[:, None].to(logits.dtype)
    penalized = torch.where(logits > 0, logits / p, logits * p)
    return torch.where(seen, penalized, logits)


def filter_logits(logits: Tensor, top_k: Tensor, top_p: Tensor) -> Tensor:
    """Mask (−inf) every token outside each row's top-k and top-p nucleus. top_k Long[B] (0 = all),
    top_p [B]. The most likely token always survives."""
    v = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    rank = torch.arange(v, device=logits.device)[None]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, v))[:, None]
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # mass of the tokens ranked above
    keep_sorted = (rank < k) & ((before < top_p[:, None]) | (rank == 0))
    keep = torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def sample(
    logits: Tensor,
    seen: Tensor,
    temperature: Tensor,
    top_k: Tensor,
    top_p: Tensor,
    penalty: Tensor,
    seeds: Tensor,
    steps: Tensor,
) -> Tensor:
    """Next tokens Long[B] from logits [B, V]; rows with temperature 0 take the argmax."""
    logits = apply_repetition_penalty(logits.float(), seen, penalty)
    greedy = logits.argmax(-1)
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    filtered = filter_logits(scaled, top_k, top_p)
    gumbel = -torch.log(-torch.log(uniform_noise(seeds, steps, logits.shape[-1])))
    drawn = (filtered + gumbel).argmax(-1)
    return torch.where(temperature > 0, drawn, greedy)
