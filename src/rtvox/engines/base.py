"""The Engine protocol, build options and the backend registry.

An engine runs one module of a model (the acoustic encoder half, the acoustic decoder half, the vocoder, ...) as
tensors in → tensors out. Backends are registered by exact name and imported only when asked for, so a CPU
install never imports compiler stacks it cannot use.

    eager      PyTorch as written (fp32 baseline)
    inductor   torch.compile over fixed shape buckets; CUDA graphs on GPU; fp16/bf16; int8 = weight-only
    aoti       AOTInductor .pt2 packages with dynamic shapes, loaded without the model's Python code
    onnx       ONNX export + ONNX Runtime (CPU; CUDA / TensorRT execution providers with onnxruntime-gpu);
               int8 = ORT dynamic or static quantization
    tensorrt   ONNX → TensorRT engine with optimization profiles, FP16/INT8, timing cache (unverified here)
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from rtvox.engines.shapes import ShapeProfile
from rtvox.errors import InputError


def check_device_name(device: str) -> str:
    """`device` when it is "auto", "cpu", "cuda" or "cuda:N"; InputError for anything else (tpu, mps, meta)."""
    if device not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", device):
        raise InputError(f"unknown device {device!r}; use auto, cpu or cuda", param="device")
    return device


def resolve_device(device: str) -> torch.device:
    """ "auto" (the GPU if there is one), "cpu", "cuda" or "cuda:N" as a torch device; InputError for anything
    else (tpu, mps, meta, ...) or for cuda without a visible GPU. Every command and the runtime use this one."""
    if check_device_name(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("device cuda was asked for but no CUDA GPU is visible; use --device cpu", param="device")
    return torch.device(device)


# Module names an engine can be built for; each maps to a method of a loaded ModelBundle.
MODULES: tuple[str, ...] = ("acoustic_encode", "acoustic_decode", "vocoder", "speaker", "emotion")


class Engine(Protocol):
    """A callable executable for one module on one device and dtype."""

    module: str  # one of MODULES
    backend: str  # registry name, e.g. "eager"
    device: torch.device
    dtype: torch.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]: ...


@dataclass
class BuildOptions:
    """How compiled backends build; eager ignores all of it."""

    profile: ShapeProfile = field(default_factory=lambda: ShapeProfile.preset("default"))
    cache_dir: Path | None = None  # None: $RTVOX_ENGINE_CACHE or ~/.cache/rtvox/engines
    model_hash: str | None = None  # bundle.model_hash; None: a hash of the module's tensors
    warmup: bool = True  # run every bucket at load
    rebuild: bool = False  # ignore cached artifacts
    mode: str | None = None  # inductor: torch.compile mode (None: reduce-overhead on GPU, default on CPU)
    int8_method: str = "dynamic"  # onnx int8: dynamic | static
    int8_modules: tuple[str, ...] = ("vocoder",)  # onnx int8 where it pays; the other modules stay fp32
    calibration: list[tuple[torch.Tensor, ...]] | None = None  # static int8 / TensorRT INT8: real inputs
    extra: dict[str, Any] = field(default_factory=dict)  # backend-specific knobs, recorded in the cache key


# backend name → "module.path:factory"; factories take (module_name, fn, device, dtype, options) → Engine.
_REGISTRY: dict[str, str] = {
    "eager": "rtvox.engines.eager:EagerEngine",
    "inductor": "rtvox.engines.inductor:build_inductor_engine",
    "aoti": "rtvox.engines.aoti:build_aoti_engine",
    "onnx": "rtvox.engines.onnxrt:build_onnx_engine",
    "tensorrt": "rtvox.engines.tensorrt:build_tensorrt_engine",
}
# What each backend has been verified on (parity tests + benchmarks); `auto` picks only from these.
VERIFIED: dict[str, tuple[str, ...]] = {
    "eager": ("cpu", "cuda"),
    "inductor": ("cpu", "cuda"),
    "aoti": ("cpu", "cuda"),
    "onnx": ("cpu",),
    "tensorrt": (),
}

ModuleFn = Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
EngineFactory = Callable[..., Engine]


def available_backends() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def build_engine(
    backend: str,
    module: str,
    fn: ModuleFn,
    device: torch.device,
    dtype: torch.dtype,
    options: BuildOptions | None = None,
) -> Engine:
    """Build an engine for `module` running `fn` (a bound model method or module) with the named backend.

    Compiled backends export the module behind `fn` (`acoustic.encode` → AcousticEncodeStep,
    `acoustic.decode` → AcousticDecodeStep, which takes its frame count from a mask the engine builds).
    dtype: float32, float16, bfloat16, or int8 (quantized: weight-only for inductor, ORT int8 for onnx).
    """
    if backend not in _REGISTRY:
        raise InputError(
            f"unknown backend {backend!r}; available here: {', '.join(available_backends())}", param="backend"
        )
    if module not in MODULES:
        raise InputError(f"unknown module {module!r}; one of {', '.join(MODULES)}", param="module")
    path, _, attr = _REGISTRY[backend].partition(":")
    factory: EngineFactory = getattr(importlib.import_module(path), attr)
    if backend == "eager":
        return factory(module, fn, device, dtype)
    engine = factory(module, fn, device, dtype, options or BuildOptions())
    if hasattr(engine, "overflow"):  # inputs past the shape profile: eager fp32, built when first needed
        engine.overflow = functools.partial(build_engine, "eager", module, fn, device, torch.float32)
    return engine
