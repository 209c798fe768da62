"""The inductor backend: torch.compile of the export-clean module over fixed shape buckets.

Every dynamic axis is padded up to a bucket of the shape profile (static input buffers per bucket, see
CompiledEngine), so each bucket is one static graph. On a GPU the default mode is "reduce-overhead" (CUDA
graphs: one graph replay per call, no per-kernel launch cost); "max-autotune" adds Triton GEMM/conv
autotuning at a much longer build. fp16/bf16 by casting a copy of the module (the duration predictor stays
fp32); int8 = weight-only int8 linears (bf16 compute on GPU). Compilation is lazy in torch, so `warmup`
runs every bucket at load.

Artifacts are not written to the engine cache folder: Inductor keeps its own on-disk FX-graph and autotune
caches (TORCHINDUCTOR_CACHE_DIR), which we point inside our cache so a rebuild of the same key is fast.
"""

from __future__ import annotations

import os

import torch
import torch._dynamo.config as dynamo_config

from rtvox.engines.base import BuildOptions, ModuleFn
from rtvox.engines.cache import CacheKey, state_hash
from rtvox.engines.compiled import CompiledEngine
from rtvox.engines.modules import cast_module, export_module, model_constants
from rtvox.engines.quant import quantize_weight_only_int8

# Each bucket is one graph of the same forward; dynamo's default recompile limit (8) would silently fall
# back to eager past the 8th bucket.
_RECOMPILE_LIMIT = 256


def _compute_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.int8:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return dtype


def raise_recompile_limits() -> None:
    """Let dynamo keep one graph per bucket (its default limit would fall back to eager past the 8th)."""
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, max(getattr(dynamo_config, name), _RECOMPILE_LIMIT))
    for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, max(getattr(dynamo_config, name), 4 * _RECOMPILE_LIMIT))


def build_inductor_engine(
    module: str, fn: ModuleFn, device: torch.device, dtype: torch.dtype, options: BuildOptions
) -> CompiledEngine:
    net = export_module(module, fn)
    compute = _compute_dtype(device, dtype)
    net = cast_module(net, device, compute)
    info: dict[str, object] = {"compute_dtype": str(compute).removeprefix("torch.")}
    if dtype == torch.int8:
        info["int8_layers"] = quantize_weight_only_int8(net)
    # reduce-overhead = CUDA graphs without autotuning: minutes less per bucket grid than max-autotune, which
    # stays one option away (BuildOptions.mode) for a long-lived server.
    mode = options.mode or ("reduce-overhead" if device.type == "cuda" else None)
    info["mode"] = mode or "default"
    key = CacheKey.make(
        options.model_hash or state_hash(net), module, "inductor", dtype, device, options.profile, {"mode": mode}
    )
    folder = key.folder(options.cache_dir)
    # Inductor's own caches (compiled kernels, autotuning results) live beside our key's meta.json.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder.parent / "inductor"))
    raise_recompile_limits()
    compiled = torch.compile(net, mode=mode, fullgraph=True, dynamic=False)
    engine = CompiledEngine(
        module,
        "inductor",
        compiled,
        device,
        dtype,
        options.profile,
        model_constants(net),
        bucketed=True,
        info={**info, "cache": str(folder)},
        compute_dtype=compute,
    )
    if options.warmup:
        engine.warmup(repeats=3 if device.type == "cuda" else 1)
    return engine
