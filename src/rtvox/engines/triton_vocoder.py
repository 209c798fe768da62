"""Fused Triton kernels for HiFi-GAN's hot path: the residual blocks of the multi-receptive-field fusion.

Each ResBlock step is x + conv2(lrelu(conv1(lrelu(x)))). Run as written that is, per conv, a leaky-ReLU
kernel writing a full activation tensor, the convolution reading it back, a bias add and a residual add: the
activations cross HBM three or four times for one convolution's worth of arithmetic. `fused_conv1d` does
lrelu-on-load → dilated conv (implicit GEMM over channel blocks × kernel taps on tensor cores) → bias →
residual add → output scale in one kernel, so each activation is read once and written once. The MRF average
(sum of blocks / n) is folded into the last block's residual input and output scale. The upsampling transposed
convolutions and conv_pre/conv_post stay with cuDNN.

Runs on CUDA; on a CPU with TRITON_INTERPRET=1 (set before triton is imported) the same kernels run in
Triton's interpreter, which is how the unit test checks them against PyTorch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.errors import ModelError

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - the CPU install has no triton
    HAVE_TRITON = False


if HAVE_TRITON:

    @triton.jit
    def _fused_conv1d_kernel(  # type: ignore[no-untyped-def]
        x_ptr,
        w_ptr,
        b_ptr,
        res_ptr,
        out_ptr,
        c_in,
        c_out,
        length,
        dilation,
        padding,
        slope,
        out_scale,
        KERNEL: tl.constexpr,
        PRE_LRELU: tl.constexpr,
        HAS_RES: tl.constexpr,
        BLOCK_CO: tl.constexpr,
        BLOCK_CI: tl.constexpr,
        BLOCK_T: tl.constexpr,
    ):
        # x [B, C_in, T], w [C_out, C_in, K], out/res [B, C_out, T], all contiguous.
        pid_b = tl.program_id(0)
        pid_co = tl.program_id(1)
        pid_t = tl.program_id(2)
        co = pid_co * BLOCK_CO + tl.arange(0, BLOCK_CO)
        t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
        acc = tl.zeros((BLOCK_CO, BLOCK_T), dtype=tl.float32)
        x_base = x_ptr + pid_b * c_in * length
        for ci0 in range(0, c_in, BLOCK_CI):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            for k in tl.static_range(KERNEL):
                src = t + k * dilation - padding  # input position of tap k for each output position
                xm = (ci[:, None] < c_in) & (src[None, :] >= 0) & (src[None, :] < length)
                xv = tl.load(x_base + ci[:, None] * length + src[None, :], mask=xm, other=0.0).to(tl.float32)
                if PRE_LRELU:
                    xv = tl.where(xv >= 0, xv, xv * slope)  # lrelu(0) = 0: zero padding stays zero
                wm = (co[:, None] < c_out) & (ci[None, :] < c_in)
                wv = tl.load(w_ptr + co[:, None] * c_in * KERNEL + ci[None, :] * KERNEL + k, mask=wm, other=0.0)
                # Tensor-core dot in the weights' dtype (bf16/fp16 on GPU), fp32 accumulation.
                acc += tl.dot(wv, xv.to(wv.dtype))
        acc += tl.load(b_ptr + co, mask=co < c_out, other=0.0).to(tl.float32)[:, None]
        om = (co[:, None] < c_out) & (t[None, :] < length)
        offs = pid_b * c_out * length + co[:, None] * length + t[None, :]
        if HAS_RES:
            acc += tl.load(res_ptr + offs, mask=om, other=0.0).to(tl.float32)
        acc = acc * out_scale
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=om)


def fused_conv1d(
    x: Tensor,
    conv: nn.Conv1d,
    *,
    pre_slope: float | None,
    residual: Tensor | None = None,
    out_scale: float = 1.0,
) -> Tensor:
    """out_scale * (conv(lrelu(x, pre_slope)) + residual), 'same' padding, stride 1, in one kernel."""
    if not HAVE_TRITON:
        raise ModelError("fused vocoder kernels need triton (pip install triton) and a CUDA GPU")
    assert conv.stride == (1,) and conv.groups == 1 and conv.bias is not None
    x = x.contiguous()
    batch, c_in, length = x.shape
    c_out, _, kernel = conv.weight.shape
    out = torch.empty(batch, c_out, length, device=x.device, dtype=x.dtype)
    res = residual.contiguous() if residual is not None else out
    block_t = 64 if length >= 64 else 16
    block_co = 64 if c_out >= 64 else 16
    block_ci = 32 if c_in >= 32 else 16
    grid = (batch, triton.cdiv(c_out, block_co), triton.cdiv(length, block_t))
    _fused_conv1d_kernel[grid](
        x,
        conv.weight.contiguous(),
        conv.bias,
        res,
        out,
        c_in,
        c_out,
        length,
        conv.dilation[0],
        int(conv.padding[0]),
        float(pre_slope if pre_slope is not None else 1.0),
        float(out_scale),
        KERNEL=kernel,
        PRE_LRELU=pre_slope is not None,
        HAS_RES=residual is not None,
        BLOCK_CO=block_co,
        BLOCK_CI=block_ci,
        BLOCK_T=block_t,
        # One stage: the default software pipeline keeps every unrolled tap's tiles in flight, 288 KB of shared
        # memory for fp32 (TF32) inputs, over an H100's 227 KB (OutOfResources, 2026-12-06), as in triton_frames.
        num_stages=1,
    )
    return out


class FusedHiFiGAN(nn.Module):
    """A HiFi-GAN generator whose residual blocks run on `fused_conv1d`; shares the original's weights.
    Same input and output as HiFiGAN.forward: mel [B, n_mels, T] -> wav [B, T * HOP_LENGTH]."""

    def __init__(self, vocoder: nn.Module) -> None:
        super().__init__()
        from rtvox.models.vocoder import LRELU_SLOPE, HiFiGAN

        if not isinstance(vocoder, HiFiGAN):
            raise ModelError(
                f"fused kernels target HiFi-GAN's residual blocks; {type(vocoder).__name__} runs on inductor"
            )
        self.vocoder = vocoder
        self.slope = LRELU_SLOPE

    def _resblock(self, block: nn.Module, x: Tensor, scale: float, acc: Tensor | None) -> Tensor:
        # ResBlock1: for each (c1, c2): x = x + c2(lrelu(c1(lrelu(x)))); the last step also adds the MRF
        # accumulator and applies its scale, so the block sum costs no extra pass.
        convs1: nn.ModuleList = block.convs1  # type: ignore[assignment]
        convs2: nn.ModuleList = block.convs2  # type: ignore[assignment]
        pairs = list(zip(convs1, convs2, strict=True))
        for i, (c1, c2) in enumerate(pairs):
            assert isinstance(c1, nn.Conv1d) and isinstance(c2, nn.Conv1d)
            h = fused_conv1d(x, c1, pre_slope=self.slope)
            last = i == len(pairs) - 1
            if last and acc is not None:
                # acc + x + c2(...) with one residual input: fold x into the accumulator first.
                x = fused_conv1d(h, c2, pre_slope=self.slope, residual=acc + x, out_scale=scale)
            else:
                x = fused_conv1d(h, c2, pre_slope=self.slope, residual=x, out_scale=scale if last else 1.0)
        return x

    def forward(self, mel: Tensor) -> Tensor:
        v = self.vocoder
        x = v.conv_pre(mel)
        n = v.n_kernels
        for i, up in enumerate(v.ups):
            x = up(F.leaky_relu(x, self.slope))
            blocks = v.resblocks[i * n : (i + 1) * n]
            mrf: Tensor | None = None
            for j, block in enumerate(blocks):
                # Partial sums stay unscaled; the last block scales the whole sum by 1/n.
                scale = 1.0 / n if j == n - 1 else 1.0
                mrf = self._resblock(block, x, scale, mrf)
            assert mrf is not None
            x = mrf
        x = v.conv_post(F.leaky_relu(x))
        return x.squeeze(1).tanh()
