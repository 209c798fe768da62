"""Build every engine of a model bundle, export artifacts, pick a backend automatically.

`build_engines(bundle, backend, device, dtype)` is what the Synthesizer (or `rtvox build`) calls: one engine
per module, from the on-disk cache when the key matches, warmed up over every bucket. `backend="auto"` takes
the fastest backend verified on the device (AUTO_ORDER, from BENCHMARKS.md) and falls back module by module to
eager with a warning when a build fails, so a broken compiler stack costs speed, never availability.
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rtvox.engines.base import MODULES, VERIFIED, BuildOptions, Engine, ModuleFn, build_engine
from rtvox.errors import InputError, ModelError
from rtvox.models.bundle import ModelBundle, model_hash

# The Synthesizer's three engines; speaker and emotion run once per reference clip (and are cached).
PIPELINE_MODULES: tuple[str, ...] = ("acoustic_encode", "acoustic_decode", "vocoder")
# Fastest first, per device type (rtvox bench; BENCHMARKS.md "Engines"). Each entry: (backend, dtype).
AUTO_ORDER: dict[str, tuple[tuple[str, torch.dtype], ...]] = {
    "cuda": (("inductor", torch.bfloat16), ("aoti", torch.bfloat16), ("eager", torch.float32)),
    # aoti on CPU measured no faster than eager for the conv stacks (both call oneDNN): onnx, then eager.
    "cpu": (("onnx", torch.float32), ("eager", torch.float32)),
}
# Modules whose order differs from their device's: the eager Vocos beats its ONNX graph on CPU (33.7 against
# 69.4 ms for 5 s, rtvox-small 5.0.0; BENCHMARKS.md). The encoder stays fp32 on a GPU: its bf16 hidden states
# moved duration rounding and cost log-mel L1 0.36 against eager fp32 on the H200 (rtvox-small 5.0.0;
# benchmarks/results/gpu/gpu_pipeline_probe_1.json).
AUTO_ORDER_MODULE: dict[tuple[str, str], tuple[tuple[str, torch.dtype], ...]] = {
    ("cpu", "vocoder"): (("eager", torch.float32), ("onnx", torch.float32)),
    ("cuda", "acoustic_encode"): (("inductor", torch.float32), ("aoti", torch.float32), ("eager", torch.float32)),
}
# Per-module orders that differ from the device's, for CPUs with native bf16 dot products (measured on the
# 2-core AMD EPYC with AVX-512 BF16, rtvox-small, 2026-12-03): the frame-rate modules run eager bf16 (oneDNN
# bf16 convolutions and linears, no padding to buckets; decode 1.5x, vocoder 2x eager fp32, log-mel L1 0.015);
# the encoder stays fp32 (in bf16 its hidden states move duration rounding: L1 0.07-0.09) on ONNX Runtime.
AUTO_ORDER_CPU_BF16: dict[str, tuple[tuple[str, torch.dtype], ...]] = {
    "acoustic_decode": (("eager", torch.bfloat16), ("onnx", torch.float32), ("eager", torch.float32)),
    "vocoder": (("eager", torch.bfloat16), ("eager", torch.float32)),
}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 dot products in hardware (AVX-512 BF16 or AMX; Linux /proc/cpuinfo).
    Elsewhere oneDNN emulates bf16 and it is slower than fp32. RTVOX_CPU_BF16=0/1 overrides the probe."""
    forced = os.environ.get("RTVOX_CPU_BF16")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def auto_order(device: torch.device, module: str) -> list[tuple[str, torch.dtype]]:
    """`--backend auto`'s candidates for one module on `device`, fastest first, verified backends only."""
    order = AUTO_ORDER_MODULE.get((device.type, module), AUTO_ORDER[device.type])
    if device.type == "cpu" and module in AUTO_ORDER_CPU_BF16 and cpu_has_native_bf16():
        order = AUTO_ORDER_CPU_BF16[module]
    return [(b, d) for b, d in order if device.type in VERIFIED[b]]


DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "int8": torch.int8,
}


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise InputError(f"unknown dtype {name!r}; one of float32, float16, bfloat16, int8", param="dtype")
    return DTYPES[name]


def module_fn(bundle: ModelBundle, module: str, device: torch.device) -> ModuleFn:
    """The bound method or module that runs `module` of a bundle (the eager engine's callable)."""
    if module == "acoustic_encode":
        return bundle.acoustic.encode
    if module == "acoustic_decode":
        return bundle.acoustic.decode
    if module == "vocoder":
        return bundle.vocoder
    if module == "emotion":
        return bundle.emotion_encoder
    if module == "speaker":
        from rtvox.models.speaker import SpeakerEncoder

        return SpeakerEncoder.load(device=device)
    raise InputError(f"unknown module {module!r}; one of {', '.join(MODULES)}", param="module")


def _options_for(bundle: ModelBundle, options: BuildOptions | None) -> BuildOptions:
    """`options` with this bundle's model hash filled in, as a copy: the caller's object is never stamped, so one
    BuildOptions can build several models' engines without the second finding the first's in the cache."""
    options = options or BuildOptions()
    if options.model_hash is None and bundle.path is not None:
        options = copy.copy(options)
        options.model_hash = model_hash(bundle.path)
    return options


def build_engines(
    bundle: ModelBundle,
    backend: str,
    device: torch.device | str,
    dtype: torch.dtype | str = torch.float32,
    modules: Sequence[str] = PIPELINE_MODULES,
    options: BuildOptions | None = None,
    *,
    fallback: bool | None = None,
) -> dict[str, Engine]:
    """One engine per module. fallback (default: only for backend="auto"): a module whose build fails gets an
    eager engine and a warning instead of an error."""
    device = torch.device(device)
    dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    options = _options_for(bundle, options)
    if backend == "auto":
        return _build_auto(bundle, device, modules, options)
    fallback = bool(fallback)
    engines: dict[str, Engine] = {}
    for module in modules:
        fn = module_fn(bundle, module, device)
        try:
            engines[module] = build_engine(backend, module, fn, device, dtype, options)
        except (ImportError, ModelError, RuntimeError, ValueError, OSError) as exc:
            if not fallback:
                raise
            warnings.warn(f"{backend} build of {module} failed ({exc!r:.300}); using eager fp32", stacklevel=2)
            engines[module] = build_engine("eager", module, fn, device, torch.float32)
    return engines


def _build_auto(
    bundle: ModelBundle, device: torch.device, modules: Sequence[str], options: BuildOptions
) -> dict[str, Engine]:
    engines: dict[str, Engine] = {}
    for module in modules:
        fn = module_fn(bundle, module, device)
        for backend, dtype in auto_order(device, module):
            try:
                engines[module] = build_engine(backend, module, fn, device, dtype, options)
                break
            except Exception as exc:  # any compiler failure: try the next backend, and say so
                warnings.warn(f"auto: {backend} build of {module} failed ({exc!r:.300}); trying the next", stacklevel=2)
        else:
            engines[module] = build_engine("eager", module, fn, device, torch.float32)
    return engines


def describe_engines(engines: dict[str, Engine]) -> dict[str, dict[str, Any]]:
    """backend, dtype and build info of each engine (for `rtvox build` output and bench JSON)."""
    return {
        name: {
            "backend": e.backend,
            "dtype": str(e.dtype).removeprefix("torch."),
            **{k: v for k, v in getattr(e, "info", {}).items() if isinstance(v, str | int | float | bool | list)},
        }
        for name, e in engines.items()
    }


def export_artifacts(
    bundle: ModelBundle,
    backend: str,
    out: Path,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    modules: Sequence[str] = PIPELINE_MODULES,
    options: BuildOptions | None = None,
) -> dict[str, Path]:
    """Write portable artifacts (onnx: <module>.onnx; aoti: <module>.pt2) into `out` with a manifest."""
    import json
    import shutil

    if backend not in ("onnx", "aoti"):
        raise InputError(
            "export writes onnx or aoti artifacts; use `rtvox build` for the other backends", param="backend"
        )
    options = _options_for(bundle, options)
    options.warmup = False
    out.mkdir(parents=True, exist_ok=True)
    engines = build_engines(bundle, backend, device, dtype, modules, options)
    written: dict[str, Path] = {}
    manifest: dict[str, Any] = {"backend": backend, "profile": options.profile.to_dict(), "modules": {}}
    for name, engine in engines.items():
        info = getattr(engine, "info", {})
        source = Path(str(info["model"] if backend == "onnx" else info["package"]))
        target = out / f"{name}{source.suffix}"
        shutil.copyfile(source, target)
        written[name] = target
        manifest["modules"][name] = {"file": target.name, **{k: v for k, v in info.items() if k != "model"}}
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    return written
