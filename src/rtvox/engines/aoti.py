"""The aoti backend: AOTInductor packages (.pt2) built offline, loaded without the model's Python code.

Build: torch.export of the export-clean module with one torch.export.Dim per named axis of the shape
profile (min..max; the example inputs sit at opt), then `torch._inductor.aoti_compile_and_package`. The .pt2
lands in the engine cache, keyed by torch version among others (a package from torch 2.13 does not load in
2.11).

Load: on the H200 with torch 2.11 every load path segfaulted in the artifact's constructor (std::regex in
`parse_device_str`). Cause, from a native backtrace (benchmarks/probes/aoti_native_probe.py): the .so lists no
libstdc++ among its needed libraries, so its C++ runtime references bind to whatever exports them first in the
process; loading libstdc++ with RTLD_GLOBAL first (rtvox._cxxrt.cxx_runtime_first, called before every load)
makes the same artifact load and match eager there. A segfault cannot be caught, so on CUDA, on CPU with a torch
older than 2.13, or with RTVOX_AOTI_SAFE_LOAD=1, each load path is still first tried in a child process
on the package's example inputs, in LOAD_PATHS order; the first that runs and matches is recorded in
loader.json beside the package and then used in-process. Paths:
    aoti_load_package   torch._inductor.aoti_load_package (the documented API)
    package_loader      torch._C._aoti.AOTIModelPackageLoader (the C++ loader, without the Python wrapper)
    so                  a separately built shared library (torch._inductor.aot_compile), torch._export.aot_load
If none works, AotiLoadError lists what each path did.

Precision: a half-precision build (fp16/bf16) keeps the acoustic encoder's package in fp32 (FP32_PACKAGES,
`package_dtype`) and builds the frame-rate modules (decoder, vocoder) in the asked dtype, the PipelineEngine's
split; the cache key carries the dtype a package is built in, so that encoder package is the fp32 build's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.export import Dim

from rtvox._cxxrt import cxx_runtime_first
from rtvox.engines.base import BuildOptions, ModuleFn
from rtvox.engines.cache import CacheKey, state_hash
from rtvox.engines.compiled import CompiledEngine
from rtvox.engines.modules import cast_inputs, cast_module, example_inputs, export_module, model_constants
from rtvox.engines.shapes import AXES, MODULE_INPUTS, ShapeProfile
from rtvox.errors import ModelError

LOAD_PATHS: tuple[str, ...] = ("aoti_load_package", "package_loader", "so")
SAFE_LOAD_ENV = "RTVOX_AOTI_SAFE_LOAD"
_PROBE_TIMEOUT_S = 300


# Modules whose package stays fp32 when fp16/bf16 is asked for. The acoustic encoder predicts durations, rounded to
# whole frames: with its hidden states in bf16 (the duration head alone an fp32 island) the rounding moved and aoti
# bf16 audio was log-mel L1 0.102 from eager fp32 on the H200 (rtvox-small, 2026-12-04,
# benchmarks/results/gpu/gpu_engines_aoti_inprocess.json); with this package fp32, 0.019 (..._fp32enc.json).
# The encoder runs once per chunk at phoneme rate; the frame-rate half, where the time goes, stays in the asked dtype.
FP32_PACKAGES: tuple[str, ...] = ("acoustic_encode",)
# BuildOptions.extra key: False builds every module in the asked dtype (to measure what the split buys).
FP32_PACKAGES_OPTION = "aoti_fp32_packages"


def package_dtype(module: str, dtype: torch.dtype, options: BuildOptions) -> torch.dtype:
    """The dtype `module`'s package is built and run in when `dtype` is asked for (device-independent: a bf16
    encoder moved durations on the CPU too, rtvox.engines.build.AUTO_ORDER_CPU_BF16)."""
    half = dtype in (torch.float16, torch.bfloat16)
    if half and module in FP32_PACKAGES and options.extra.get(FP32_PACKAGES_OPTION, True):
        return torch.float32
    return dtype


class AotiLoadError(ModelError):
    """No AOTInductor load path works with this torch build."""


def export_program(net: torch.nn.Module, module: str, profile: ShapeProfile, example: tuple[Tensor, ...]) -> Any:
    """torch.export with the profile's ranges: one shared Dim per named axis."""
    # An axis with min == max (a batch-1 profile) stays static: torch.export has no one-value Dim.
    dims = {
        a: Dim(a, min=profile.axis(a).min, max=profile.axis(a).max)
        for a in AXES
        if profile.axis(a).max > profile.axis(a).min
    }
    dynamic = tuple(
        {i: dims[d] for i, d in enumerate(spec.dims) if isinstance(d, str) and d in dims}
        for spec in MODULE_INPUTS[module]
    )
    return torch.export.export(net, example, dynamic_shapes=dynamic, strict=False)


def _load(path: str, package: Path, device: torch.device) -> Callable[..., Any]:
    cxx_runtime_first()  # the artifact's C++ runtime symbols must bind to libstdc++ (module docstring)
    index = device.index if device.index is not None else (0 if device.type == "cuda" else -1)
    if path == "aoti_load_package":
        return torch._inductor.aoti_load_package(str(package), device_index=index)
    if path == "package_loader":
        loader = torch._C._aoti.AOTIModelPackageLoader(str(package), "model", False, 1, index)
        run = loader.boxed_run if hasattr(loader, "boxed_run") else loader.run
        return lambda *xs: run(list(xs))
    if path == "so":
        so = package.with_suffix(".so")
        if not so.is_file():
            raise AotiLoadError(f"{so} was not built")
        return torch._export.aot_load(str(so), device.type)
    raise ValueError(path)


def _build_so(make_program: Callable[[], Any], example: tuple[Tensor, ...], target: Path) -> None:
    options = {"aot_inductor.output_path": str(target)}
    with torch.no_grad():
        built = torch._inductor.aot_compile(make_program().module(), example, options=options)
    if Path(str(built)) != target and Path(str(built)).is_file():
        os.replace(str(built), target)


def _probe(path: str, package: Path, device: torch.device) -> dict[str, Any]:
    """Try one load path in a child process (a segfault kills only the child)."""
    code = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from rtvox.engines.aoti import _load\n"
        f"pkg = Path({str(package)!r}); dev = torch.device({str(device)!r})\n"
        "io = torch.load(pkg.with_name('probe_io.pt'))\n"
        f"run = _load({path!r}, pkg, dev)\n"
        "out = run(*[x.to(dev) for x in io['inputs']])\n"
        "out = [out] if isinstance(out, torch.Tensor) else list(out)\n"
        "err = max(float((o.float().cpu() - r.float()).abs().max()) for o, r in zip(out, io['outputs']))\n"
        "print('MAXERR', err); sys.stdout.flush()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return {"rc": proc.returncode, "tail": lines[-3:]}


# The oldest torch whose CPU packages were seen to load in-process (2.13 on the dev VM); torch 2.11 on the H200
# segfaults loading CPU packages too (benchmarks/results/gpu/aoti_probe_cpu_h200.json).
CPU_LOAD_VERIFIED = (2, 13)


def needs_safe_load(device: torch.device, version: str | None = None) -> bool:
    """Whether a package must first be loaded in a child process: always on CUDA, on CPU with a torch older than
    the one verified here, or when RTVOX_AOTI_SAFE_LOAD=1."""
    if device.type != "cpu" or os.environ.get(SAFE_LOAD_ENV) == "1":
        return True
    major, minor = (int(part) for part in re.findall(r"\d+", version or torch.__version__)[:2])
    return (major, minor) < CPU_LOAD_VERIFIED


# The load path that worked for a package in this process: later packages (same torch, same device type)
# skip the child-process probes, which cost an interpreter start each.
_PROVEN: dict[str, str] = {}


def _choose_loader(
    package: Path, device: torch.device, make_program: Callable[[], Any], example: tuple[Tensor, ...]
) -> str:
    record = package.with_name("loader.json")
    if record.is_file():
        return str(json.loads(record.read_text())["path"])
    if device.type in _PROVEN and _PROVEN[device.type] != "so":
        return _PROVEN[device.type]
    tried: dict[str, Any] = {}
    for path in LOAD_PATHS:
        if path == "so":
            try:
                _build_so(make_program, example, package.with_suffix(".so"))
            except Exception as exc:  # recorded; the error below names every path's failure
                tried[path] = {"build_error": repr(exc)[:300]}
                continue
        tried[path] = result = _probe(path, package, device)
        if result["rc"] == 0:
            record.write_text(json.dumps({"path": path, "tried": tried}, indent=1))
            _PROVEN[device.type] = path
            return path
    raise AotiLoadError(
        f"no AOTInductor load path works with torch {torch.__version__} on {device}: {json.dumps(tried)[:1500]}; "
        "use --backend inductor (same compiler, no package) or eager"
    )


def build_aoti_engine(
    module: str, fn: ModuleFn, device: torch.device, dtype: torch.dtype, options: BuildOptions
) -> CompiledEngine:
    if dtype == torch.int8:
        raise ModelError("aoti has no int8 path; use --backend inductor --dtype int8 (GPU) or onnx int8 (CPU)")
    compute = package_dtype(module, dtype, options)
    net = cast_module(export_module(module, fn), device, compute)
    constants = model_constants(net)
    profile = options.profile
    autotune = bool(options.extra.get("aoti_max_autotune", False))
    # Keyed by the dtype the package is built in: a bf16 request's fp32 encoder is the fp32 request's package.
    key = CacheKey.make(
        options.model_hash or state_hash(net), module, "aoti", compute, device, profile, {"max_autotune": autotune}
    )
    folder = key.folder(options.cache_dir)
    package = folder / "model.pt2"
    example = cast_inputs(example_inputs(module, net, profile, "opt", device), compute)
    program = None
    if options.rebuild or not package.is_file():
        for stale in (package, package.with_name("loader.json"), package.with_suffix(".so")):
            stale.unlink(missing_ok=True)
        with torch.no_grad():
            program = export_program(net, module, profile, example)
            configs = {"max_autotune": True} if autotune else None
            torch._inductor.aoti_compile_and_package(program, package_path=str(package), inductor_configs=configs)
            outputs = net(*example)
        outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        torch.save(
            {"inputs": [x.cpu() for x in example], "outputs": [o.cpu() for o in outputs]}, folder / "probe_io.pt"
        )
    if needs_safe_load(device):
        path = _choose_loader(
            package, device, lambda: program or export_program(net, module, profile, example), example
        )
    else:
        path = LOAD_PATHS[0]
    runner = _load(path, package, device)  # the package holds its own weights: no Python model is kept
    engine = CompiledEngine(
        module,
        "aoti",
        runner,
        device,
        dtype,
        profile,
        constants,
        bucketed=False,
        info={
            "package": str(package),
            "load_path": path,
            "max_autotune": autotune,
            "compute_dtype": str(compute).removeprefix("torch."),
        },
        compute_dtype=compute,
    )
    if options.warmup:
        engine.warmup(repeats=1)
    return engine
