"""The Engine protocol and the backend registry.

An engine runs one module of a model (the acoustic encoder half, the acoustic decoder half, the vocoder, ...) as
tensors in → tensors out. Backends are registered by exact name and imported only when asked for, so a CPU
install never imports compiler stacks it cannot use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

import torch

from rtvox.errors import InputError

# Module names an engine can be built for; each maps to a method of a loaded ModelBundle.
MODULES: tuple[str, ...] = ("acoustic_encode", "acoustic_decode", "vocoder", "speaker", "emotion")


class Engine(Protocol):
    """A callable executable for one module on one device and dtype."""

    module: str  # one of MODULES
    backend: str  # registry name, e.g. "eager"
    device: torch.device
    dtype: torch.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]: ...


# backend name → "module.path:factory"; factories take (module_name, fn, device, dtype) and return an Engine.
_REGISTRY: dict[str, str] = {
    "eager": "rtvox.engines.eager:EagerEngine",
}

EngineFactory = Callable[
    [str, Callable[..., torch.Tensor | tuple[torch.Tensor, ...]], torch.device, torch.dtype], Engine
]


def available_backends() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def build_engine(
    backend: str,
    module: str,
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
    device: torch.device,
    dtype: torch.dtype,
) -> Engine:
    """Build an engine for `module` running `fn` (a bound model method) with the named backend."""
    if backend not in _REGISTRY:
        raise InputError(
            f"unknown backend {backend!r}; available here: {', '.join(available_backends())}", param="backend"
        )
    if module not in MODULES:
        raise InputError(f"unknown module {module!r}; one of {', '.join(MODULES)}", param="module")
    path, _, attr = _REGISTRY[backend].partition(":")
    factory: EngineFactory = getattr(importlib.import_module(path), attr)
    return factory(module, fn, device, dtype)
