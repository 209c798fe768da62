"""Building blocks of the rtvox models: masks, positions, (conditional) layer norms, attention, FFT blocks.

Everything here is export-clean: tensors in, tensors out, shapes taken from inputs, no Python branching on
tensor values, no buffers (positions are computed on the fly, so modules built on the `meta` device need
nothing re-materialized after loading). Padding is handled with masks: every convolution sees zeros at padded
positions and attention never looks at padded keys, so a sequence's outputs do not depend on how much padding
the batch adds around it.

Also holds the small dict <-> frozen-dataclass helpers every component config uses.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.errors import ModelError

C = TypeVar("C")


# ------------------------------------------------------------------------------ config helpers
def _tuplify(value: Any) -> Any:
    # JSON has no tuples; configs hold only tuples (hashable, frozen), so every list read back becomes one.
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def config_from_dict(cls: type[C], data: dict[str, Any], what: str) -> C:
    """Build the frozen dataclass `cls` from JSON data; unknown keys are a broken model directory."""
    assert dataclasses.is_dataclass(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ModelError(
            f"unknown {what} config keys {unknown}; known keys are {sorted(known)} "
            "(was the model saved by a newer rtvox? upgrade rtvox)"
        )
    try:
        return cls(**{k: _tuplify(v) for k, v in data.items()})
    except (TypeError, ValueError) as e:
        raise ModelError(f"invalid {what} config: {e}") from e


def config_to_dict(config: Any) -> dict[str, Any]:
    """JSON-ready dict of a config dataclass (tuples become lists when serialized)."""
    return dataclasses.asdict(config)


# ------------------------------------------------------------------------------ masks, positions
def sequence_mask(lengths: Tensor, max_len: int) -> Tensor:
    # lengths: Long[B] -> Bool[B, max_len], True at real positions
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def masked_fill_zero(x: Tensor, mask: Tensor) -> Tensor:
    # x: [B, N, D], mask: Bool[B, N] -> x with padded positions set to exactly 0 (also clears NaN/inf there)
    return torch.where(mask.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))


def sinusoid_positions(length: int, dim: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """Transformer sine/cosine position table [length, dim] (dim even), computed, never stored."""
    half = dim // 2
    inv_freq = torch.exp(torch.arange(half, device=device, dtype=torch.float32) * (-math.log(10000.0) / half))
    angles = torch.arange(length, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).to(dtype)  # [length, dim]


# ------------------------------------------------------------------------------ norms
class ConditionalLayerNorm(nn.Module):
    """LayerNorm whose scale and shift are predicted from a condition vector (AdaSpeech's conditional LN).

    The projections start at zero, so an untrained model behaves as a plain LayerNorm (scale 1, shift 0).
    With cond_dim == 0 it *is* a plain LayerNorm with learned affine parameters.
    """

    def __init__(self, dim: int, cond_dim: int = 0, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.cond_dim = cond_dim
        if cond_dim > 0:
            self.to_scale = nn.Linear(cond_dim, dim)
            self.to_shift = nn.Linear(cond_dim, dim)
            for layer in (self.to_scale, self.to_shift):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        else:
            self.weight = nn.Parameter(torch.ones(dim))
            self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor, cond: Tensor | None = None) -> Tensor:
        # x: [B, N, dim], cond: [B, cond_dim] (required iff cond_dim > 0) -> [B, N, dim]
        if self.cond_dim == 0:
            return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)
        assert cond is not None, "this layer norm is conditional; pass cond"
        normed = F.layer_norm(x, (self.dim,), None, None, self.eps)
        scale = 1.0 + self.to_scale(cond)  # [B, dim]
        shift = self.to_shift(cond)  # [B, dim]
        return normed * scale[:, None, :] + shift[:, None, :]


class ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channel axis of a conv feature map [B, C, T]."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


# ------------------------------------------------------------------------------ attention, FFN
class SelfAttention(nn.Module):
    """Multi-head self-attention over real positions only (padded keys are masked out)."""

    def __init__(self, dim: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        assert dim % n_heads == 0, f"dim {dim} is not divisible by n_heads {n_heads}"
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: [B, N, D], mask: Bool[B, N] -> [B, N, D]
        b, n, d = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each [B, H, N, head_dim]
        p = self.dropout if self.training else 0.0
        # Plain ops for exported graphs (CUDA SDPA pads the mask to a multiple of 8 and emits shape guards that
        # torch.export cannot prove for a dynamic N; ONNX/TensorRT fuse this pattern themselves), and for bf16/fp16
        # on a CPU, where two oneDNN matmuls beat SDPA's CPU kernel 2-3x (206 against 428 µs at N=188, 744
        # against 2147 at N=470, 2 heads of 128, 2 cores).
        if torch.compiler.is_exporting() or (x.device.type == "cpu" and x.dtype != torch.float32 and not p):
            y = masked_attention(q, k, v, mask, p)
        elif torch.compiler.is_compiling() and x.is_cuda and not p:
            y = torch.ops.rtvox.masked_sdpa(q, k, v, mask)  # SDPA's own kernel, opaque to Inductor (below)
        else:
            # A query whose keys are all padding (an all-padding row) gives NaN; callers zero padded rows.
            attn_mask = mask[:, None, None, :].expand(b, 1, n, n)  # [B, 1, N, N], True = may attend
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)  # [B, H, N, head_dim]
        return self.out(y.transpose(1, 2).reshape(b, n, d))


@torch.library.custom_op("rtvox::masked_sdpa", mutates_args=())
def masked_sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """SDPA over real keys (q, k, v: [B, H, N, d], mask: Bool[B, N] -> contiguous [B, H, N, d]) as one opaque op.

    Why an op of its own: torch.compile with dynamic shapes (the GPU pipeline's "dynamic" kernels) traced SDPA
    with a padding mask into its math form — a materialized [B, H, N, N] softmax, ~1 GB per layer for 64 rows
    of 1 500 frames (BENCHMARKS.md, H200 runs 7–8). Inside this op SDPA picks its fused kernel at run time,
    whatever the tracer saw; used only while compiling for CUDA."""
    b, _, n, _ = q.shape
    attn_mask = mask[:, None, None, :].expand(b, 1, n, n)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).contiguous()


@masked_sdpa.register_fake
def _masked_sdpa_fake(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, dropout: float = 0.0) -> Tensor:
    """softmax(q k^T / sqrt(d)) v over real keys, in plain ops.

    q, k, v: [B, H, N, d], mask: Bool[B, N] -> [B, H, N, d].

    Masked scores take the dtype's lowest finite value, so an all-padding row is uniform instead of NaN.
    """
    scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)  # [B, H, N, N]
    scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
    weights = F.dropout(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(weights, v)


class ConvFeedForward(nn.Module):
    """FastSpeech's position-wise FFN: two 1-D convolutions (kernel sizes e.g. (9, 1)) around a ReLU."""

    def __init__(self, dim: int, hidden: int, kernels: tuple[int, int], dropout: float = 0.0) -> None:
        super().__init__()
        k1, k2 = kernels
        assert k1 % 2 == 1 and k2 % 2 == 1, "odd kernels keep the length ('same' padding)"
        self.conv1 = nn.Conv1d(dim, hidden, k1, padding=k1 // 2)
        self.conv2 = nn.Conv1d(hidden, dim, k2, padding=k2 // 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: [B, N, D], mask: Bool[B, N] -> [B, N, D]; padded inputs are zeroed so they never leak into a conv
        h = masked_fill_zero(x, mask).transpose(1, 2)  # [B, D, N]
        h = self.dropout(F.relu(self.conv1(h)))  # [B, hidden, N]
        h = h * mask[:, None, :].to(h.dtype)
        return self.conv2(h).transpose(1, 2)  # [B, N, D]


class FFTBlock(nn.Module):
    """Pre-norm feed-forward Transformer block: x + Attn(LN(x)), then x + ConvFFN(LN(x)); norms conditional
    when cond_dim > 0. Padded positions of the output are exactly zero."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        ff_dim: int,
        ff_kernels: tuple[int, int],
        dropout: float = 0.0,
        cond_dim: int = 0,
    ) -> None:
        super().__init__()
        self.norm1 = ConditionalLayerNorm(dim, cond_dim)
        self.attn = SelfAttention(dim, n_heads, dropout)
        self.norm2 = ConditionalLayerNorm(dim, cond_dim)
        self.ffn = ConvFeedForward(dim, ff_dim, ff_kernels, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor, cond: Tensor | None = None) -> Tensor:
        # x: [B, N, D], mask: Bool[B, N], cond: [B, C] or None -> [B, N, D]
        x = x + self.dropout(self.attn(self.norm1(x, cond), mask))
        x = masked_fill_zero(x, mask)
        x = x + self.dropout(self.ffn(self.norm2(x, cond), mask))
        return masked_fill_zero(x, mask)


class FFTStack(nn.Module):
    """Sinusoidal positions + FFT blocks + a final (conditional) norm: the encoder and decoder body."""

    def __init__(
        self,
        n_layers: int,
        dim: int,
        n_heads: int,
        ff_dim: int,
        ff_kernels: tuple[int, int],
        dropout: float = 0.0,
        cond_dim: int = 0,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.blocks = nn.ModuleList(
            [FFTBlock(dim, n_heads, ff_dim, ff_kernels, dropout, cond_dim) for _ in range(n_layers)]
        )
        self.norm = ConditionalLayerNorm(dim, cond_dim)

    def forward(
        self, x: Tensor, mask: Tensor, cond: Tensor | None = None, states: list[Tensor] | None = None
    ) -> Tensor:
        # x: [B, N, D], mask: Bool[B, N] -> [B, N, D], zero at padding; `states` (training only) receives each
        # block's output, the residual stream before the final norm
        x = x + sinusoid_positions(x.shape[1], self.dim, x.device, x.dtype)[None]
        x = masked_fill_zero(x, mask)
        for block in self.blocks:
            x = block(x, mask, cond)
            if states is not None:
                states.append(x)
        return masked_fill_zero(self.norm(x, cond), mask)


def count_parameters(module: nn.Module) -> int:
    """Number of parameters (each tensor counted once)."""
    return sum(p.numel() for p in module.parameters())
