"""The eager backend: the model's own PyTorch forward, the baseline every other backend is compared against.

fp32 runs the bundle's modules as they are. fp16/bf16 run a cast copy (rtvox.engines.modules.cast_module: the
duration predictor and the vocoder's iSTFT head stay fp32) with floating inputs cast to it and floating outputs
returned as fp32, so callers never see the engine's precision. On a CPU with native bf16 dot products
(AVX-512 BF16 or AMX) oneDNN runs bf16 convolutions ~2× and linears ~3.5× faster than fp32, with no compile
step and no shape padding: what `--backend auto` uses there for the frame-rate modules (BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from rtvox.engines.modules import cast_inputs, cast_module

LOW_PRECISION: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)


def _cast_callable(
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]], device: torch.device, dtype: torch.dtype
) -> Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]:
    """The same callable on a `dtype` copy of its module: a module, or a bound method of one."""
    if isinstance(fn, nn.Module):
        return cast_module(fn, device, dtype)
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None)
    if not isinstance(owner, nn.Module) or name is None:
        raise ValueError(f"eager {dtype} needs a module or a bound method of one, got {type(fn).__name__}")
    method: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]] = getattr(cast_module(owner, device, dtype), name)
    return method


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

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = cast_inputs(inputs, self.dtype) if self.dtype in LOW_PRECISION else inputs
        with torch.inference_mode():
            out = self._fn(*args)
        # Modules return a bare tensor or a tuple; engines always hand back a tuple, floating parts in fp32.
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        return tuple(t.float() if t.is_floating_point() and t.dtype != torch.float32 else t for t in outs)
