"""Fused Triton kernels for the frame-rate half of the serving step (decoder FFNs and the Vocos backbone).

Where a 64-row serving step's GPU time went (BENCHMARKS.md, runs 6-8): unfused memory-bound kernels — each
FFN and ConvNeXt block ran as 7-9 kernels (masks, layout transposes for cuDNN, the convolution, an activation,
the second GEMM, a scale, a residual add), so the [rows, frames, 768] hidden activation and the [rows, frames,
256] stream crossed HBM several times for one block's arithmetic. Here each block is two kernels over a
channels-last [B, T, C] stream:

- `fused_ffn`: out = residual + act(Σ_j x[t + j − K//2] W1_j + b1) W2 + b2 (zero where masked) — the first
  GEMM an implicit convolution over K taps (the decoder's kernel-5 conv; K = 1 for ConvNeXt's pointwise layer),
  the hidden tile kept on chip (tensor-core dots per BLOCK_I slice of the hidden width, accumulated straight into
  the output tile), masks and the residual folded in. The hidden activation never reaches HBM.
- `dwconv_layernorm`: LayerNorm(depthwise conv(x)) in one pass (ConvNeXt's first half).

Numerics: fp32 accumulation and fp32 LayerNorm statistics; the hidden slice is rounded to the stream's dtype
before the second GEMM (as the unfused bf16 path rounds it); ConvNeXt's layer scale γ is folded into W2 and b2.
Runs on CUDA; with TRITON_INTERPRET=1 set before triton is imported the same kernels run on the CPU in Triton's
interpreter, which is how the unit tests check them against the modules they replace.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.models.layers import ConvFeedForward, FFTBlock, masked_fill_zero
from rtvox.models.vocos import ConvNeXtBlock, Vocos

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - the CPU install has no triton
    HAVE_TRITON = False

# tiles: rows per program, hidden units per slice, warps, pipeline stages (RTVOX_FRAME_TILES for experiments)
_TILES = tuple(int(v) for v in os.environ.get("RTVOX_FRAME_TILES", "32x64x4x1").split("x"))
# ConvNeXt's MLP: "triton" (fused_ffn, the hidden slice on chip) or "cublas" (two GEMMs, GELU in the first's
# epilogue, the hidden activation through HBM); RTVOX_FRAME_MLP for experiments
_MLP = os.environ.get("RTVOX_FRAME_MLP", "triton")


if HAVE_TRITON:

    @triton.jit
    def _ffn_kernel(  # type: ignore[no-untyped-def]
        x_ptr,
        mask_ptr,
        w1_ptr,
        b1_ptr,
        w2_ptr,
        b2_ptr,
        res_ptr,
        out_ptr,
        length,
        hidden,
        C: tl.constexpr,
        K1: tl.constexpr,
        GELU: tl.constexpr,
        HAS_MASK: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_I: tl.constexpr,
    ):
        # x/res/out [B, T, C] contiguous; mask [B, T] uint8; w1 [K1, C, I]; w2 [I, C]; C a power of two.
        pid_b = tl.program_id(0)
        pid_t = tl.program_id(1)
        t = pid_t * BLOCK_M + tl.arange(0, BLOCK_M)
        c = tl.arange(0, C)
        row0 = pid_b * length
        inside = t < length
        if HAS_MASK:  # noqa: SIM108 - constexpr branches, not run-time values
            keep = tl.load(mask_ptr + row0 + t, mask=inside, other=0) != 0
        else:
            keep = inside
        acc = tl.zeros([BLOCK_M, C], dtype=tl.float32)
        # the pointwise case (K1 = 1) reads its input tile once, before the loop over hidden slices
        x0 = tl.load(x_ptr + (row0 + t)[:, None] * C + c[None, :], mask=keep[:, None], other=0.0)
        for i0 in range(0, hidden, BLOCK_I):
            ii = i0 + tl.arange(0, BLOCK_I)
            if K1 == 1:
                s = tl.dot(x0, tl.load(w1_ptr + c[:, None] * hidden + ii[None, :]))
            else:
                s = tl.zeros([BLOCK_M, BLOCK_I], dtype=tl.float32)
                for j in tl.static_range(K1):
                    src = t + (j - K1 // 2)
                    ok = (src >= 0) & (src < length)
                    if HAS_MASK:
                        ok = ok & (tl.load(mask_ptr + row0 + src, mask=ok, other=0) != 0)
                    xv = tl.load(x_ptr + (row0 + src)[:, None] * C + c[None, :], mask=ok[:, None], other=0.0)
                    wv = tl.load(w1_ptr + j * C * hidden + c[:, None] * hidden + ii[None, :])
                    s += tl.dot(xv, wv)
            s += tl.load(b1_ptr + ii).to(tl.float32)[None, :]
            if GELU:  # noqa: SIM108
                s = 0.5 * s * (1.0 + tl.math.erf(s * 0.7071067811865476))
            else:
                s = tl.maximum(s, 0.0)
            if HAS_MASK:
                s = tl.where(keep[:, None], s, 0.0)
            w2v = tl.load(w2_ptr + ii[:, None] * C + c[None, :])
            acc += tl.dot(s.to(w2v.dtype), w2v)
        acc += tl.load(b2_ptr + c).to(tl.float32)[None, :]
        offs = (row0 + t)[:, None] * C + c[None, :]
        acc += tl.load(res_ptr + offs, mask=inside[:, None], other=0.0).to(tl.float32)
        if HAS_MASK:
            acc = tl.where(keep[:, None], acc, 0.0)
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=inside[:, None])

    @triton.jit
    def _dwconv_ln_kernel(  # type: ignore[no-untyped-def]
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        beta_ptr,
        out_ptr,
        length,
        eps,
        C: tl.constexpr,
        K: tl.constexpr,
        BLOCK_M: tl.constexpr,
    ):
        # x/out [B, T, C] contiguous; w [C, K]; LayerNorm over C (a power of two).
        pid_b = tl.program_id(0)
        pid_t = tl.program_id(1)
        t = pid_t * BLOCK_M + tl.arange(0, BLOCK_M)
        c = tl.arange(0, C)
        row0 = pid_b * length
        acc = tl.zeros([BLOCK_M, C], dtype=tl.float32)
        for j in tl.static_range(K):
            src = t + (j - K // 2)
            ok = (src >= 0) & (src < length)
            xv = tl.load(x_ptr + (row0 + src)[:, None] * C + c[None, :], mask=ok[:, None], other=0.0)
            acc += xv.to(tl.float32) * tl.load(w_ptr + c * K + j).to(tl.float32)[None, :]
        acc += tl.load(b_ptr + c).to(tl.float32)[None, :]
        mean = tl.sum(acc, axis=1) / C
        d = acc - mean[:, None]
        var = tl.sum(d * d, axis=1) / C
        y = d * tl.rsqrt(var + eps)[:, None]
        y = y * tl.load(g_ptr + c).to(tl.float32)[None, :] + tl.load(beta_ptr + c).to(tl.float32)[None, :]
        inside = t < length
        tl.store(out_ptr + (row0 + t)[:, None] * C + c[None, :], y.to(out_ptr.dtype.element_ty), mask=inside[:, None])


def _check_width(c: int) -> None:
    if c < 16 or c & (c - 1):
        raise ValueError(f"fused frame kernels need a power-of-two width >= 16, got {c}")


def _check_ffn(c: int, hidden: int) -> None:
    """What fused_ffn takes, checked when a block is fused (not at its first run, inside a capture)."""
    _check_width(c)
    if hidden % _TILES[1]:
        raise ValueError(f"hidden width {hidden} is not a multiple of the tile {_TILES[1]}")


def fused_ffn(
    x: Tensor,
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    residual: Tensor,
    mask: Tensor | None,
    *,
    gelu: bool,
) -> Tensor:
    """residual + act(conv_K(x) + b1) W2 + b2 over [B, T, C] (zero where `mask` [B, T] is False; masked input
    rows read as zero). w1 [K, C, I] (tap, in, hidden), w2 [I, C]; act GELU (erf) or ReLU."""
    batch, length, c = x.shape
    k1, _, hidden = w1.shape
    block_m, block_i, warps, stages = _TILES
    _check_ffn(c, hidden)
    out = torch.empty_like(residual)
    mask_u8 = mask.view(torch.uint8) if mask is not None else x  # unused when HAS_MASK is off
    grid = (batch, triton.cdiv(length, block_m))
    _ffn_kernel[grid](
        x, mask_u8, w1, b1, w2, b2, residual, out, length, hidden,
        C=c, K1=k1, GELU=gelu, HAS_MASK=mask is not None, BLOCK_M=block_m, BLOCK_I=block_i, num_warps=warps,
        num_stages=stages,
    )  # fmt: skip
    return out


def dwconv_layernorm(x: Tensor, weight: Tensor, bias: Tensor, ln_weight: Tensor, ln_bias: Tensor, eps: float) -> Tensor:
    """LayerNorm(depthwise conv(x)) over [B, T, C] ('same' zero padding); weight [C, K]."""
    batch, length, c = x.shape
    _check_width(c)
    block_m = 32
    out = torch.empty_like(x)
    grid = (batch, triton.cdiv(length, block_m))
    _dwconv_ln_kernel[grid](
        x,
        weight,
        bias,
        ln_weight,
        ln_bias,
        out,
        length,
        eps,
        C=c,
        K=weight.shape[1],
        BLOCK_M=block_m,
        num_warps=4,
        num_stages=1,
    )
    return out


def _bias(conv: nn.Conv1d) -> Tensor:
    if conv.bias is None:
        return torch.zeros(conv.out_channels, dtype=conv.weight.dtype, device=conv.weight.device)
    return conv.bias.detach()


class FusedConvNeXt(nn.Module):
    """A ConvNeXt block on a channels-last [B, T, C] stream: two kernels (dwconv+LN, then the fused MLP with γ
    folded into its second layer and the residual added)."""

    def __init__(self, block: ConvNeXtBlock, mlp: str | None = None) -> None:
        super().__init__()
        self.mlp = mlp or _MLP
        if self.mlp not in ("triton", "cublas"):
            raise ValueError(f"mlp must be 'triton' or 'cublas', got {self.mlp!r}")
        _check_width(block.pw1.in_features)
        if self.mlp == "triton":
            _check_ffn(block.pw1.in_features, block.pw1.out_features)
        gamma = block.gamma.detach()
        self.dw_weight = nn.Parameter(block.dwconv.weight.detach()[:, 0, :].contiguous(), requires_grad=False)
        self.dw_bias = nn.Parameter(_bias(block.dwconv).clone(), requires_grad=False)
        self.ln_weight = nn.Parameter(block.norm.weight.detach().clone(), requires_grad=False)
        self.ln_bias = nn.Parameter(block.norm.bias.detach().clone(), requires_grad=False)
        self.eps = block.norm.eps
        self.w1 = nn.Parameter(block.pw1.weight.detach().t().contiguous()[None], requires_grad=False)  # [1, C, I]
        self.b1 = nn.Parameter(block.pw1.bias.detach().clone(), requires_grad=False)
        w2 = (block.pw2.weight.detach().float() * gamma.float()[:, None]).to(gamma.dtype)  # [C, I]
        self.w2 = nn.Parameter(w2.t().contiguous(), requires_grad=False)  # [I, C]
        self.b2 = nn.Parameter((block.pw2.bias.detach().float() * gamma.float()).to(gamma.dtype), requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        h = dwconv_layernorm(x, self.dw_weight, self.dw_bias, self.ln_weight, self.ln_bias, self.eps)
        if self.mlp == "triton":
            return fused_ffn(h, self.w1, self.b1, self.w2, self.b2, x, None, gelu=True)
        batch, length, c = x.shape
        # GELU in cuBLASLt's epilogue on CUDA (its tanh form: within bf16 rounding of the erf form)
        hidden = torch._addmm_activation(self.b1, h.view(-1, c), self.w1[0], use_gelu=True)
        return torch.addmm(x.view(-1, c), hidden, self.w2).add_(self.b2).view(batch, length, c)


class FusedVocos(nn.Module):
    """`Vocos.forward` with the backbone channels-last and each ConvNeXt block fused; embed conv, norms and the
    iSTFT head are the original modules."""

    def __init__(self, vocos: Vocos, mlp: str | None = None) -> None:
        super().__init__()
        self.config = vocos.config
        self.embed, self.norm_in, self.norm_out, self.head = vocos.embed, vocos.norm_in, vocos.norm_out, vocos.head
        self.blocks = nn.ModuleList([FusedConvNeXt(b, mlp) for b in vocos.blocks])  # type: ignore[arg-type]

    def forward(self, mel: Tensor) -> Tensor:
        x = self.norm_in(self.embed(mel).transpose(1, 2)).contiguous()  # [B, T, C]
        for block in self.blocks:
            x = block(x)
        wav: Tensor = self.head(self.norm_out(x))
        return wav.clamp(-1.0, 1.0)

    @property
    def receptive_field_frames(self) -> int:
        return self.config.receptive_field_frames


class FusedFFTBlock(nn.Module):
    """An unconditional FFTBlock with its conv FFN (kernels (K, 1), ReLU) as one kernel: attention as before,
    then residual + FFN(LN(x)) with the masks folded in."""

    def __init__(self, block: FFTBlock) -> None:
        super().__init__()
        ffn = block.ffn
        assert isinstance(ffn, ConvFeedForward)
        if ffn.conv2.kernel_size[0] != 1 or block.norm2.cond_dim:
            raise ValueError("FusedFFTBlock needs an unconditional norm and a pointwise second conv")
        _check_ffn(ffn.conv1.in_channels, ffn.conv1.out_channels)
        self.norm1, self.attn, self.norm2 = block.norm1, block.attn, block.norm2
        w1 = ffn.conv1.weight.detach()  # [I, C, K]
        self.w1 = nn.Parameter(w1.permute(2, 1, 0).contiguous(), requires_grad=False)  # [K, C, I]
        self.b1 = nn.Parameter(_bias(ffn.conv1).clone(), requires_grad=False)
        self.w2 = nn.Parameter(ffn.conv2.weight.detach()[:, :, 0].t().contiguous(), requires_grad=False)  # [I, C]
        self.b2 = nn.Parameter(_bias(ffn.conv2).clone(), requires_grad=False)

    def forward(self, x: Tensor, mask: Tensor, cond: Tensor | None = None) -> Tensor:
        x = masked_fill_zero(x + self.attn(self.norm1(x, cond), mask), mask).contiguous()
        return fused_ffn(self.norm2(x, cond), self.w1, self.b1, self.w2, self.b2, x, mask, gelu=False)


def fuse_frame_rate(
    decoder: nn.Module, vocoder: nn.Module, *, decoder_ffn: bool = False
) -> tuple[nn.Module, list[str]]:
    """Swap the fused kernels into a pipeline's frame-rate half: the vocoder for a FusedVocos (when it is a Vocos
    with a power-of-two width) and, with `decoder_ffn`, the acoustic decoder's FFT blocks in place (when
    unconditional with (K, 1) FFN kernels) → (the vocoder to run, what was fused). Unfusable parts stay as they
    are. The decoder FFN is off by default: on an H100 the kernel-5 FFN fused ran 1.01-1.53 ms against cuDNN's
    0.92 for a 64 × 700-frame block (BENCHMARKS.md), while the ConvNeXt block gained 1.5×."""
    fused: list[str] = []
    stack = getattr(decoder, "decoder", None)
    blocks = getattr(stack, "blocks", None)
    if decoder_ffn and isinstance(blocks, nn.ModuleList):
        try:  # every block or none: each checks what the kernels take before any is swapped in
            swapped = [FusedFFTBlock(b) if isinstance(b, FFTBlock) else b for b in blocks]
        except ValueError:
            swapped = []
        for i, block in enumerate(swapped):
            blocks[i] = block
        if swapped:
            fused.append("decoder_ffn")
    if isinstance(vocoder, Vocos):
        try:
            vocoder = FusedVocos(vocoder)
            fused.append("vocos_blocks")
        except ValueError:
            pass
    return vocoder, fused


def reference_ffn(
    x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, residual: Tensor, mask: Tensor | None, *, gelu: bool
) -> Tensor:
    """`fused_ffn` in plain PyTorch (fp32), for tests and probes."""
    k1 = w1.shape[0]
    xf = x.float() if mask is None else masked_fill_zero(x, mask).float()
    h = F.conv1d(xf.transpose(1, 2), w1.float().permute(2, 1, 0), b1.float(), padding=k1 // 2)  # [B, I, T]
    h = F.gelu(h) if gelu else F.relu(h)
    out = residual.float() + h.transpose(1, 2) @ w2.float() + b2.float()
    return out if mask is None else masked_fill_zero(out, mask)
