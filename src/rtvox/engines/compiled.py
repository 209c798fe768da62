"""The shared body of every compiled engine: input adaptation, padding into static per-bucket buffers, the
dtype boundary, cutting padded outputs back to the caller's sizes, and warm-up over the profile's buckets.

A backend only supplies a `runner` (padded, cast tensors in → tensors out). Static-shape backends
(inductor with CUDA graphs) pad every dynamic axis up to its bucket and reuse one set of input buffers per
bucket, so a captured graph always reads the same addresses; dynamic-shape backends (aoti, onnx, tensorrt)
only pad up to each axis' minimum.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from rtvox.engines.modules import adapt_inputs, cast_inputs, make_inputs
from rtvox.engines.shapes import (
    AXES,
    MODULE_INPUTS,
    MODULE_OUTPUTS,
    PINNED_AXES,
    ShapeOutOfProfileError,
    ShapeProfile,
    output_size,
)

Runner = Callable[..., Tensor | tuple[Tensor, ...] | list[Tensor]]

logger = logging.getLogger(__name__)


class CompiledEngine:
    """An Engine around a backend runner. Owns the runner, the shape profile, the per-bucket input buffers
    and the warm-up record; `info` says what was built (for bench reports and `rtvox build`)."""

    def __init__(
        self,
        module: str,
        backend: str,
        runner: Runner,
        device: torch.device,
        dtype: torch.dtype,
        profile: ShapeProfile,
        constants: dict[str, int],
        *,
        bucketed: bool,
        info: dict[str, Any] | None = None,
        compute_dtype: torch.dtype | None = None,
    ) -> None:
        self.module = module
        self.backend = backend
        # Builds an engine without a shape profile (eager fp32 of the same module, `build_engine` sets it) that
        # serves inputs past this one's profile, built at the first such input: slower, never refused.
        self.overflow: Callable[[], Any] | None = None
        self._overflow_engine: Any = None
        self.device = device
        self.dtype = dtype  # what was asked for (int8 included)
        self.compute_dtype = compute_dtype or dtype  # what floating inputs are cast to
        self.profile = profile
        self.constants = constants
        self.bucketed = bucketed
        self.info: dict[str, Any] = dict(info or {})
        self._runner = runner
        self._buffers: dict[tuple[int, ...], list[Tensor]] = {}  # bucket sizes -> static padded inputs

    # ------------------------------------------------------------------ sizes
    def _real_sizes(self, inputs: tuple[Tensor, ...]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for spec, tensor in zip(MODULE_INPUTS[self.module], inputs, strict=True):
            for dim, n in zip(spec.dims, tensor.shape, strict=True):
                if isinstance(dim, str) and dim in AXES:
                    sizes[dim] = max(sizes.get(dim, 0), int(n))
        return sizes

    def _target_sizes(self, sizes: dict[str, int]) -> dict[str, int]:
        target = {}
        for axis, n in sizes.items():
            rng = self.profile.axis(axis)
            if self.bucketed and axis in PINNED_AXES.get(self.module, ()):
                rng.bucket(n, axis)  # range check only
                target[axis] = rng.max
            elif self.bucketed:
                target[axis] = rng.bucket(n, axis)
            else:
                rng.bucket(n, axis)
                target[axis] = max(n, rng.min)
        return target

    # ------------------------------------------------------------------ padding
    def _pad(self, inputs: tuple[Tensor, ...], sizes: dict[str, int], target: dict[str, int]) -> tuple[Tensor, ...]:
        if sizes == target:
            return inputs
        key = tuple(target[a] for a in AXES if a in target)
        buffers = self._buffers.get(key) if self.bucketed else None
        fresh = buffers is None
        if buffers is None:
            buffers = []
        out = []
        for i, (spec, x) in enumerate(zip(MODULE_INPUTS[self.module], inputs, strict=True)):
            shape = tuple(
                target.get(d, n) if isinstance(d, str) else n for d, n in zip(spec.dims, x.shape, strict=True)
            )
            if fresh:
                buf = torch.empty(shape, dtype=x.dtype, device=x.device)
                buffers.append(buf)
            else:
                buf = buffers[i]
            buf.fill_(spec.pad)
            region = tuple(slice(0, n) for n in x.shape)
            buf[region].copy_(x)
            batch = sizes.get("batch", 1)
            if spec.dims and spec.dims[0] == "batch" and buf.shape[0] > batch:
                # Padding rows repeat the first row: a real, well-formed input (an all-masked row could
                # produce NaN in attention), whose outputs are cut away.
                buf[batch:].copy_(buf[:1].expand_as(buf[batch:]))
            out.append(buf)
        if fresh and self.bucketed:
            self._buffers[key] = buffers
        return tuple(out)

    def _cut(self, outputs: tuple[Tensor, ...], sizes: dict[str, int]) -> tuple[Tensor, ...]:
        cut = []
        for (_, dims), y in zip(MODULE_OUTPUTS[self.module], outputs, strict=True):
            region = tuple(slice(0, output_size(d, sizes, self.constants)) for d in dims)
            y = y[region]
            # A float copy: callers get fp32 whatever the engine computes in, and CUDA-graph outputs are
            # overwritten by the next replay.
            cut.append(y.float() if y.is_floating_point() and y.dtype != torch.float32 else y.clone())
        return tuple(cut)

    # ------------------------------------------------------------------ call
    def __call__(self, *given: Tensor) -> tuple[Tensor, ...]:
        inputs = adapt_inputs(self.module, tuple(given))
        inputs = tuple(t.to(self.device) for t in inputs)
        sizes = self._real_sizes(inputs)
        try:
            target = self._target_sizes(sizes)
        except ShapeOutOfProfileError as exc:
            if self.overflow is None:
                raise
            if self._overflow_engine is None:
                logger.warning("%s (%s): %s; serving such inputs with eager fp32", self.module, self.backend, exc)
                self._overflow_engine = self.overflow()
            result: tuple[Tensor, ...] = self._overflow_engine(*given)  # as the caller gave them
            return result
        padded = self._pad(inputs, sizes, target)
        with torch.inference_mode():
            out = self._runner(*cast_inputs(padded, self.compute_dtype))
        outputs = (out,) if isinstance(out, Tensor) else tuple(out)
        return self._cut(outputs, sizes)

    def warmup(self, repeats: int = 2) -> float:
        """Run every bucket (static backends) or the opt point (dynamic ones) `repeats` times so compilation,
        autotuning and CUDA-graph capture happen at load, not on the first request. Returns seconds."""
        t0 = time.perf_counter()
        if self.bucketed:
            grid = self.profile.bucket_grid(self.module)
        else:
            grid = [{a: int(self.profile.axis(a).opt) for a in AXES}]
        for point in grid:
            sizes = {a: point.get(a, self.profile.axis(a).max) for a in AXES}
            inputs = make_inputs(self.module, sizes, self.constants, self.device)
            for _ in range(repeats):
                self(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - t0
        self.info["warmup_s"] = round(seconds, 3)
        self.info["warmup_shapes"] = len(grid)
        return seconds
