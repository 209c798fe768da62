"""The eager backend: the model's own PyTorch forward, the baseline every other backend is compared against."""

from __future__ import annotations

from collections.abc import Callable

import torch


class EagerEngine:
    """Runs a bound model method under inference mode; owns nothing but the callable."""

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
        self.dtype = dtype
        self._fn = fn

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.inference_mode():
            out = self._fn(*inputs)
        # Modules return a bare tensor or a tuple; engines always hand back a tuple.
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)
