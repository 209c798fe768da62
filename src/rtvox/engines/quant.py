"""INT8 where it pays.

GPU (torch): weight-only int8 for linear layers (and 1x1 convolutions, which are linears over channels).
Weights are stored as int8 with one fp scale per output channel; the forward dequantizes into the matmul's
input dtype, which Inductor fuses into the GEMM prologue: half the weight bytes of bf16 for memory-bound
small-batch decoding, activations untouched.

CPU (ONNX Runtime): dynamic int8 (weights int8, activations quantized per call; no calibration) or static
int8 in QDQ form with a calibration reader fed by real inputs (mels of real sentences for the vocoder).
Quality is measured by the caller against eager fp32 (log-mel L1); see tests/unit/engines/test_int8.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Int8WeightOnlyLinear(nn.Module):
    """y = x @ (int8 W * scale)^T + b, with W quantized symmetrically per output channel."""

    qweight: Tensor  # int8 [out, in]
    scale: Tensor  # [out, 1]
    bias: Tensor | None

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        w = weight.detach().float()  # [out, in]
        scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / 127.0  # [out, 1]
        self.register_buffer("qweight", torch.round(w / scale).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(weight.dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        w = self.qweight.to(x.dtype) * self.scale.to(x.dtype)
        return F.linear(x, w, None if self.bias is None else self.bias.to(x.dtype))


class Int8WeightOnlyPointwiseConv(nn.Module):
    """A kernel-1 Conv1d ([B, C, T] -> [B, C', T]) as an int8 weight-only linear over channels."""

    def __init__(self, conv: nn.Conv1d) -> None:
        super().__init__()
        self.linear = Int8WeightOnlyLinear(conv.weight[:, :, 0], conv.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x.transpose(1, 2)).transpose(1, 2)


def quantize_weight_only_int8(net: nn.Module) -> int:
    """Swap every nn.Linear (and pointwise, ungrouped, unpadded Conv1d) for its int8 weight-only twin, in
    place. Returns how many layers were swapped."""
    from rtvox.engines.modules import Fp32Island

    swapped = 0
    # fp32 islands (duration predictor) keep their float weights: durations decide the audio's timing.
    islands = {id(m) for island in net.modules() if isinstance(island, Fp32Island) for m in island.modules()}
    for parent in list(net.modules()):
        if id(parent) in islands:
            continue
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8WeightOnlyLinear(child.weight, child.bias))
                swapped += 1
            elif (
                type(child) is nn.Conv1d
                and child.kernel_size == (1,)
                and child.groups == 1
                and child.stride == (1,)
                and child.padding in ((0,), 0)
            ):
                setattr(parent, name, Int8WeightOnlyPointwiseConv(child))
                swapped += 1
    return swapped


# ---------------------------------------------------------------------------------------------- ONNX Runtime
class TensorCalibrationReader:
    """onnxruntime.quantization.CalibrationDataReader over a list of input tuples (real sentences' tensors)."""

    def __init__(self, names: Sequence[str], samples: Sequence[tuple[Tensor, ...]]) -> None:
        self._feeds = [{n: t.detach().cpu().numpy() for n, t in zip(names, sample, strict=True)} for sample in samples]
        self._iter: Iterator[dict[str, np.ndarray]] = iter(self._feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self._feeds)


def quantize_onnx_int8(
    source: Path,
    target: Path,
    method: str = "dynamic",
    calibration: Sequence[tuple[Tensor, ...]] | None = None,
    input_names: Sequence[str] = (),
) -> dict[str, Any]:
    """Quantize an ONNX model to int8 with ONNX Runtime's tools; returns what was done (for the cache meta).

    dynamic: int8 weights, activations quantized at run time (MatMul/Gemm/Conv); no data needed.
    static: QDQ int8 weights and activations with ranges calibrated on `calibration` (MinMax on real inputs).
    """
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = target.with_name(target.stem + ".pre.onnx")
    try:
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    except Exception:  # pre-processing is an optimization; quantize the plain graph instead
        prepared = source
    if method == "dynamic":
        quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8, per_channel=True)
    elif method == "static":
        if not calibration:
            raise ValueError("static int8 needs calibration inputs (real sentences); pass calibration=[...]")
        reader = TensorCalibrationReader(input_names, calibration)
        quantize_static(
            str(prepared),
            str(target),
            reader,
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
    else:
        raise ValueError(f"unknown int8 method {method!r}; use dynamic or static")
    if prepared != source:
        prepared.unlink(missing_ok=True)
    return {"int8": method, "calibration_samples": len(calibration or ())}
