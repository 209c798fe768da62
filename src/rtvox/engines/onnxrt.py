"""The onnx backend: ONNX export with dynamic axes, graph simplification, ONNX Runtime sessions.

Export: torch.onnx's dynamo exporter (torch.export + onnxscript, opset 18) with one Dim per named axis of the
shape profile; if it fails, the TorchScript exporter with the same axes as `dynamic_axes`. Which one ran is
recorded in the engine's info. Simplification: onnxslim when installed, else onnxscript's optimizer (constant
folding, dead code). int8: ONNX Runtime dynamic or static quantization (rtvox.engines.quant).

Sessions: CPU here. With onnxruntime-gpu, the TensorRT execution provider (fp16/int8 flags, engine and timing
caches in the engine cache folder, one optimization profile = the shape profile's min/opt/max) ahead of the CUDA
provider ahead of the CPU one. The GPU providers are unverified in our environment (no onnxruntime-gpu there).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rtvox.engines.aoti import export_program
from rtvox.engines.base import BuildOptions, ModuleFn
from rtvox.engines.cache import CacheKey, state_hash
from rtvox.engines.compiled import CompiledEngine
from rtvox.engines.modules import cast_inputs, cast_module, example_inputs, export_module, model_constants
from rtvox.engines.shapes import MODULE_INPUTS, MODULE_OUTPUTS, ShapeProfile
from rtvox.errors import ModelError
from rtvox.fsutil import atomic_write_bytes

OPSET = 18


def input_names(module: str) -> list[str]:
    return [spec.name for spec in MODULE_INPUTS[module]]


def output_names(module: str) -> list[str]:
    return [name for name, _ in MODULE_OUTPUTS[module]]


def export_onnx(
    net: torch.nn.Module, module: str, profile: ShapeProfile, example: tuple[Tensor, ...], target: Path
) -> dict[str, Any]:
    """Write `net` as ONNX at `target` with the profile's dynamic axes; returns {exporter, simplifier}."""
    import onnx

    info: dict[str, Any] = {"opset": OPSET}
    try:
        program = export_program(net, module, profile, example)
        # the exporter prints its progress on stdout: to stderr, so a command's own output (JSON of a benchmark,
        # audio on `-o -`) stays clean when an engine is built along the way
        with contextlib.redirect_stdout(sys.stderr):
            onnx_program = torch.onnx.export(
                program,
                example,
                input_names=input_names(module),
                output_names=output_names(module),
                opset_version=OPSET,
            )
        assert onnx_program is not None
        onnx_program.save(str(target))
        info["exporter"] = "dynamo"
    except Exception as exc:  # the TorchScript exporter below is the documented fallback
        info["dynamo_error"] = repr(exc)[:300]
        with contextlib.redirect_stdout(sys.stderr):
            torch.onnx.export(
                net,
                example,
                str(target),
                input_names=input_names(module),
                output_names=output_names(module),
                dynamic_axes=profile.dynamic_axes(module),
                opset_version=OPSET,
                dynamo=False,
            )
        info["exporter"] = "torchscript"
    model = onnx.load(str(target))
    info["simplifier"] = "none"
    try:
        import onnxslim

        model = onnxslim.slim(model)
        info["simplifier"] = "onnxslim"
    except ImportError:
        try:
            import onnxscript.optimizer

            model = onnxscript.optimizer.optimize(model)
            info["simplifier"] = "onnxscript"
        except Exception as exc:  # an unsimplified graph is still correct
            info["simplify_error"] = repr(exc)[:200]
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    info["nodes"] = len(model.graph.node)
    return info


def _profile_string(shapes: dict[str, tuple[int, ...]]) -> str:
    return ",".join(f"{name}:{'x'.join(map(str, shape))}" for name, shape in shapes.items())


def providers_for(
    device: torch.device,
    dtype: torch.dtype,
    folder: Path,
    module: str,
    profile: ShapeProfile,
    constants: dict[str, int],
) -> list[Any]:
    """ONNX Runtime execution providers, best first, with their options."""
    import onnxruntime as ort

    available = set(ort.get_available_providers())
    chosen: list[Any] = []
    if device.type == "cuda":
        index = device.index or 0
        if "TensorrtExecutionProvider" in available:
            (folder / "ort_trt").mkdir(exist_ok=True)
            chosen.append(
                (
                    "TensorrtExecutionProvider",
                    {
                        "device_id": index,
                        "trt_fp16_enable": dtype in (torch.float16, torch.bfloat16),
                        "trt_int8_enable": dtype == torch.int8,
                        "trt_engine_cache_enable": True,
                        "trt_engine_cache_path": str(folder / "ort_trt"),
                        "trt_timing_cache_enable": True,
                        "trt_timing_cache_path": str(folder / "ort_trt"),
                        "trt_profile_min_shapes": _profile_string(profile.shapes(module, constants, "min")),
                        "trt_profile_opt_shapes": _profile_string(profile.shapes(module, constants, "opt")),
                        "trt_profile_max_shapes": _profile_string(profile.shapes(module, constants, "max")),
                    },
                )
            )
        if "CUDAExecutionProvider" in available:
            chosen.append(("CUDAExecutionProvider", {"device_id": index}))
        if not chosen:
            raise ModelError("onnx on cuda needs onnxruntime-gpu (pip install onnxruntime-gpu); use --device cpu")
    chosen.append("CPUExecutionProvider")
    return chosen


class OrtRunner:
    """Runs an ORT session on torch tensors: numpy feeds on CPU, IO binding of device pointers on CUDA."""

    def __init__(self, session: Any, module: str, device: torch.device) -> None:
        self.session = session
        self.inputs = input_names(module)
        self.outputs = output_names(module)
        self.device = device

    def __call__(self, *xs: Tensor) -> tuple[Tensor, ...]:
        if self.device.type != "cuda":
            feeds = {n: x.detach().cpu().numpy() for n, x in zip(self.inputs, xs, strict=True)}
            return tuple(torch.from_numpy(np.asarray(y)) for y in self.session.run(self.outputs, feeds))
        binding = self.session.io_binding()
        for name, x in zip(self.inputs, xs, strict=True):
            x = x.contiguous()
            np_dtype = torch.empty(0, dtype=x.dtype).numpy().dtype if x.dtype != torch.bfloat16 else np.float32
            binding.bind_input(name, "cuda", self.device.index or 0, np_dtype, tuple(x.shape), x.data_ptr())
        for name in self.outputs:
            binding.bind_output(name, "cuda", self.device.index or 0)
        self.session.run_with_iobinding(binding)
        return tuple(torch.from_numpy(y).to(self.device) for y in binding.copy_outputs_to_cpu())


def build_onnx_engine(
    module: str, fn: ModuleFn, device: torch.device, dtype: torch.dtype, options: BuildOptions
) -> CompiledEngine:
    import onnxruntime as ort

    gpu_providers = {"CUDAExecutionProvider", "TensorrtExecutionProvider"}
    if device.type == "cuda" and not gpu_providers & set(ort.get_available_providers()):
        raise ModelError("onnx on cuda needs onnxruntime-gpu (pip install onnxruntime-gpu); use --device cpu")
    if dtype == torch.int8 and module not in options.int8_modules:
        dtype = torch.float32  # int8 only where it was measured to pay (BuildOptions.int8_modules)
    if dtype == torch.bfloat16:
        raise ModelError("onnx engines run fp32, fp16 (GPU) or int8; use --dtype float16")
    if dtype == torch.float16 and device.type != "cuda":
        raise ModelError("fp16 ONNX on CPU is slower than fp32 in ONNX Runtime; use float32 or int8 on CPU")
    net = cast_module(export_module(module, fn), device if dtype == torch.float16 else torch.device("cpu"), dtype)
    constants = model_constants(net)
    profile = options.profile
    method = options.int8_method if dtype == torch.int8 else None
    key = CacheKey.make(options.model_hash or state_hash(net), module, "onnx", dtype, device, profile, {"int8": method})
    folder = key.folder(options.cache_dir)
    model_path = folder / ("model.int8.onnx" if method else "model.onnx")
    # int8 starts from the fp32 export, kept in the fp32 engine's folder so either build reuses the other's.
    fp_key = CacheKey.make(key.model_hash, module, "onnx", torch.float32, device, profile, {"int8": None})
    fp_model = fp_key.folder(options.cache_dir) / "model.onnx" if method else model_path
    info: dict[str, Any] = {}
    if options.rebuild or not model_path.is_file():
        example = cast_inputs(example_inputs(module, net, profile, "opt", next(net.parameters()).device), dtype)
        if options.rebuild or not fp_model.is_file():
            # written beside the target, then renamed over it: server workers that build the same engine at once
            # (`rtvox serve --workers N` on a CPU) never load another's half-written file
            fp_model.parent.mkdir(parents=True, exist_ok=True)
            partial = fp_model.with_name(f".{fp_model.name}.{os.getpid()}.partial")
            try:
                with torch.no_grad():
                    exported = export_onnx(net, module, profile, example, partial)
                atomic_write_bytes(fp_model.with_name("export.json"), json.dumps(exported, indent=1).encode())
                os.replace(partial, fp_model)
            finally:
                partial.unlink(missing_ok=True)
        if method:
            from rtvox.engines.quant import quantize_onnx_int8

            info |= quantize_onnx_int8(fp_model, model_path, method, options.calibration, input_names(module))
    del net
    record = fp_model.with_name("export.json")  # how the fp32 graph was made, cached or not
    if record.is_file():
        info |= json.loads(record.read_text())
    sess_options = ort.SessionOptions()
    sess_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess_options.intra_op_num_threads = torch.get_num_threads()
    sess_options.inter_op_num_threads = 1
    # ORT's pool threads spin for a while after each run by default; in a process where torch runs the next
    # module (mixed engines, the Synthesizer's other work) they take the cores from it: onnx encode followed by
    # an eager decode ran that decode 3x slower (26 -> 78 ms, rtvox-small, 2 cores). No spinning costs ORT
    # itself a wake-up per call.
    sess_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = providers_for(device, dtype, folder, module, profile, constants)
    session = ort.InferenceSession(str(model_path), sess_options=sess_options, providers=providers)
    info |= {"model": str(model_path), "providers": session.get_providers()}
    engine = CompiledEngine(
        module,
        "onnx",
        OrtRunner(session, module, device),
        device,
        dtype,
        profile,
        constants,
        bucketed=False,
        info=info,
        compute_dtype=torch.float16 if dtype == torch.float16 else torch.float32,
    )
    if options.warmup:
        engine.warmup(repeats=1)
    return engine


def copy_artifact(engine: CompiledEngine, target: Path) -> Path:
    """Copy an engine's ONNX file to `target` (what `rtvox export` hands to other runtimes)."""
    source = Path(str(engine.info["model"]))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target
