"""The tensorrt backend: ONNX → TensorRT engine. UNVERIFIED: TensorRT cannot be installed in our environment
(no package on the H200 machine, and its PyPI wheels download from a host we cannot reach). Written against
TensorRT's documented Python API (8.6 / 10.x); its tests skip when `tensorrt` is missing.

Build: the ONNX file of the onnx backend (same export, same dynamic axes) is parsed; one optimization
profile per engine holds the shape profile's min/opt/max for every input; FP16 sets BuilderFlag.FP16; INT8
sets BuilderFlag.INT8 with an entropy calibrator fed by real inputs (options.calibration: tensors of real
sentences, e.g. rtvox bench's texts through the acoustic model) and a calibration profile; a timing cache file
in the engine cache folder makes rebuilds fast. The serialized engine is cached (it is tied to the GPU model
and the TensorRT version, both in the cache key).

Run: tensors of torch (CUDA) are bound by address (`set_tensor_address`), shapes set per call
(`set_input_shape`), outputs allocated at the shapes the context reports, `execute_async_v3` on torch's
current stream: no host copies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from rtvox.engines.base import BuildOptions, ModuleFn
from rtvox.engines.cache import CacheKey, state_hash
from rtvox.engines.compiled import CompiledEngine
from rtvox.engines.modules import cast_module, example_inputs, export_module, model_constants
from rtvox.engines.onnxrt import export_onnx, input_names, output_names
from rtvox.engines.shapes import ShapeProfile
from rtvox.errors import ModelError

WORKSPACE_BYTES = 4 << 30


def _import_trt() -> Any:
    try:
        import tensorrt as trt
    except ImportError:
        raise ModelError(
            "the tensorrt backend needs NVIDIA TensorRT (pip install tensorrt) and a CUDA GPU; "
            "use --backend inductor or aoti"
        ) from None
    return trt


def _calibrator(trt: Any, samples: list[tuple[Tensor, ...]], names: list[str], cache: Path) -> Any:
    """An IInt8EntropyCalibrator2 over real input tuples (one per batch), with a calibration cache file."""

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            super().__init__()
            self._batches = [tuple(t.cuda().contiguous() for t in s) for s in samples]
            self._index = 0

        def get_batch_size(self) -> int:
            return int(self._batches[0][0].shape[0]) if self._batches else 1

        def get_batch(self, requested: list[str]) -> list[int] | None:
            if self._index >= len(self._batches):
                return None
            batch = dict(zip(names, self._batches[self._index], strict=True))
            self._index += 1
            return [int(batch[n].data_ptr()) for n in requested]

        def read_calibration_cache(self) -> bytes | None:
            return cache.read_bytes() if cache.is_file() else None

        def write_calibration_cache(self, data: Any) -> None:
            cache.write_bytes(bytes(data))

    return Calibrator()


def build_serialized_engine(
    onnx_path: Path,
    module: str,
    profile: ShapeProfile,
    constants: dict[str, int],
    dtype: torch.dtype,
    folder: Path,
    calibration: list[tuple[Tensor, ...]] | None = None,
) -> bytes:
    """ONNX file → serialized TensorRT engine with one optimization profile from the shape profile."""
    trt = _import_trt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    # TensorRT 10 networks are always explicit-batch; 8.x needs the flag.
    flag = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
    network = builder.create_network(0 if flag is None else 1 << int(flag))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ModelError(f"TensorRT cannot parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    opt_profile = builder.create_optimization_profile()
    lo, opt, hi = (profile.shapes(module, constants, w) for w in ("min", "opt", "max"))
    for name in input_names(module):
        opt_profile.set_shape(name, lo[name], opt[name], hi[name])
    config.add_optimization_profile(opt_profile)
    if dtype in (torch.float16, torch.bfloat16):
        config.set_flag(trt.BuilderFlag.FP16)
    if dtype == torch.int8:
        if not calibration:
            raise ModelError("TensorRT INT8 needs calibration inputs from real sentences (options.calibration)")
        config.set_flag(trt.BuilderFlag.INT8)
        config.set_flag(trt.BuilderFlag.FP16)  # layers INT8 cannot run fall back to FP16, not FP32
        config.int8_calibrator = _calibrator(trt, calibration, input_names(module), folder / "calibration.cache")
        config.set_calibration_profile(opt_profile)
    timing_path = folder / "timing.cache"
    timing = config.create_timing_cache(timing_path.read_bytes() if timing_path.is_file() else b"")
    config.set_timing_cache(timing, False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ModelError(f"TensorRT failed to build an engine for {module} (see the TensorRT log above)")
    timing_path.write_bytes(bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


class TrtRunner:
    """Executes a deserialized engine on torch CUDA tensors (one execution context, torch's stream)."""

    _DTYPES: ClassVar[dict[str, torch.dtype]] = {
        "FLOAT": torch.float32,
        "HALF": torch.float16,
        "INT64": torch.int64,
        "INT32": torch.int32,
    }

    def __init__(self, serialized: bytes, module: str, device: torch.device) -> None:
        trt = _import_trt()
        self._runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engine = self._runtime.deserialize_cuda_engine(serialized)
        self.context = self.engine.create_execution_context()
        self.inputs = input_names(module)
        self.outputs = output_names(module)
        self.device = device

    def __call__(self, *xs: Tensor) -> tuple[Tensor, ...]:
        for name, x in zip(self.inputs, xs, strict=True):
            x = x.contiguous()
            self.context.set_input_shape(name, tuple(x.shape))
            self.context.set_tensor_address(name, x.data_ptr())
        outs = []
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            dtype = self._DTYPES.get(self.engine.get_tensor_dtype(name).name, torch.bool)
            out = torch.empty(shape, dtype=dtype, device=self.device)
            self.context.set_tensor_address(name, out.data_ptr())
            outs.append(out)
        if not self.context.execute_async_v3(torch.cuda.current_stream(self.device).cuda_stream):
            raise ModelError("TensorRT execution failed")
        return tuple(outs)


def build_tensorrt_engine(
    module: str, fn: ModuleFn, device: torch.device, dtype: torch.dtype, options: BuildOptions
) -> CompiledEngine:
    _import_trt()
    if device.type != "cuda":
        raise ModelError("TensorRT runs on CUDA GPUs only; use --device cuda or another backend")
    net = cast_module(export_module(module, fn), device, torch.float32)  # TensorRT lowers precision itself
    constants = model_constants(net)
    key = CacheKey.make(options.model_hash or state_hash(net), module, "tensorrt", dtype, device, options.profile)
    folder = key.folder(options.cache_dir)
    plan = folder / "model.engine"
    if options.rebuild or not plan.is_file():
        onnx_path = folder / "model.onnx"
        with torch.no_grad():
            export_onnx(
                net, module, options.profile, example_inputs(module, net, options.profile, "opt", device), onnx_path
            )
        plan.write_bytes(
            build_serialized_engine(onnx_path, module, options.profile, constants, dtype, folder, options.calibration)
        )
    engine = CompiledEngine(
        module,
        "tensorrt",
        TrtRunner(plan.read_bytes(), module, device),
        device,
        dtype,
        options.profile,
        constants,
        bucketed=False,
        info={"plan": str(plan), "verified": False},
        compute_dtype=torch.float32,  # the network's inputs stay fp32; TensorRT picks layer precisions
    )
    if options.warmup:
        engine.warmup(repeats=1)
    return engine
