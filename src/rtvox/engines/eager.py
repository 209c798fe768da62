"""The eager backend: the model's own PyTorch forward, the baseline every other backend is compared against.

fp32 runs the bundle's modules as they are. fp16/bf16 run a cast copy (rtvox.engines.modules.cast_module: the
duration predictor and the vocoder's iSTFT head stay fp32) with floating inputs cast to it and floating outputs
returned as fp32, so callers never see the engine's precision. On a CPU with native bf16 dot products
(AVX-512 BF16 or AMX) oneDNN runs bf16 convolutions ~2× and linears ~3.5× faster than fp32, with no compile
step and no shape padding: what `--backend auto` uses there for the frame-rate modules (BENCHMARKS.md).
On the CPU the bf16 copy's linears hold their weight pre-reordered for oneDNN (`prepack_linears`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from rtvox.engines.modules import cast_inputs, cast_module

LOW_PRECISION: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
# The row count oneDNN is told to expect when a linear's weight is reordered; any count runs correctly (1 to
# 6 000 rows measured no slower than the plain linear), this one is about a 2-s chunk's frames.
PACK_ROWS_HINT = 256


class PackedLinear(nn.Module):
    """A bf16 nn.Linear whose weight was reordered once into oneDNN's blocked layout.

    A plain bf16 linear on the CPU has oneDNN reorder its weight on every call: fixed work per call whatever
    the row count, which short chunks feel most (rtvox-small 2 s on the 2-core CPU: ~0.3 ms of the decode,
    ~0.4 ms of the vocoder, interleaved A/B of the two engines). Same kernel, same result bit for bit. The
    wrapped linear stays a child, so parameters(), dtype and device read as before."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear
        # An mkldnn tensor, not a parameter or buffer: state_dict and parameters() keep the plain weight.
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACK_ROWS_HINT)

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.linear.bias, "none", [], "")
        return out


@functools.cache
def can_pack_bf16_linears() -> bool:
    """Whether this torch build and CPU run oneDNN's packed bf16 linear. Builds without it lack the op; CPUs
    without AVX-512 (BW/VL/DQ) or AVX-NE-CONVERT have the op, which then refuses to reorder a bf16 weight (a plain
    bf16 linear still runs there, emulated). Asked once, of a 1x1 weight, so the answer is the machine's own."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(1, 1, dtype=torch.bfloat16), 1)
    except RuntimeError:
        return False
    return True


def prepack_linears(net: nn.Module) -> int:
    """Swap every bf16 nn.Linear of `net` (a CPU engine's own copy) for a PackedLinear; returns how many.
    fp32 islands keep their plain linears. Where this torch build or CPU has no oneDNN bf16 linear, nothing changes.
    (Convolutions are not packed: a packed bf16 conv weight ran ~28 ms instead of 0.2 ms below ~96 frames.)"""
    if not can_pack_bf16_linears():
        return 0
    swaps = [
        (parent, name, child)
        for parent in net.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear and child.weight.dtype == torch.bfloat16 and child.weight.device.type == "cpu"
    ]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear(child))
    return len(swaps)


def _cast_callable(
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]], device: torch.device, dtype: torch.dtype
) -> Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]:
    """The same callable on a `dtype` copy of its module: a module, or a bound method of one."""
    if isinstance(fn, nn.Module):
        return _cast_copy(fn, device, dtype)
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None)
    if not isinstance(owner, nn.Module) or name is None:
        raise ValueError(f"eager {dtype} needs a module or a bound method of one, got {type(fn).__name__}")
    method: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]] = getattr(_cast_copy(owner, device, dtype), name)
    return method


def _cast_copy(net: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    out = cast_module(net, device, dtype)
    if device.type == "cpu" and dtype == torch.bfloat16:
        prepack_linears(out)
    return out


class EagerEngine:
    """Runs a bound model method (or a module) under inference mode; fp16/bf16 on a cast copy of it."""

    backend = "eager"

    def __init__(
        self,
        module: str,
        fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.module = module
        self.device = device
        self.dtype = dtype if dtype in LOW_PRECISION else torch.float32
        self._fn = _cast_callable(fn, device, dtype) if self.dtype in LOW_PRECISION else fn
        self.info: dict[str, object] = {"compute_dtype": str(self.dtype).removeprefix("torch.")}
        owner = self._fn if isinstance(self._fn, nn.Module) else getattr(self._fn, "__self__", None)
        if isinstance(owner, nn.Module) and (packed := sum(isinstance(m, PackedLinear) for m in owner.modules())):
            self.info["packed_linears"] = packed

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = cast_inputs(inputs, self.dtype) if self.dtype in LOW_PRECISION else inputs
        with torch.inference_mode():
            out = self._fn(*args)
        # Modules return a bare tensor or a tuple; engines always hand back a tuple, floating parts in fp32.
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        return tuple(t.float() if t.is_floating_point() and t.dtype != torch.float32 else t for t in outs)
