"""INT8 engines, each with its own quality bound (log-mel L1 against eager fp32)."""

from __future__ import annotations

import copy

import pytest
import torch

from rtvox.engines import build_engine
from rtvox.engines.base import BuildOptions
from rtvox.engines.quality import log_mel_l1, random_inputs
from rtvox.engines.quant import Int8WeightOnlyLinear, quantize_weight_only_int8
from rtvox.models.bundle import ModelBundle

from .conftest import CPU


def _mels(bundle: ModelBundle, seed: int) -> list[torch.Tensor]:
    """Mels from the acoustic model (what the vocoder sees in service), one per request."""
    cfg = bundle.config.acoustic
    out = []
    with torch.no_grad():
        for i, (n, frames) in enumerate([(8, 60), (20, 150), (40, 240)]):
            inputs = random_inputs([n], cfg.cond_dim, cfg.vocab_size, [frames], seed=seed + i).tensors(CPU)
            hidden, durations = bundle.acoustic.encode(*inputs)
            out.append(bundle.acoustic.decode(hidden, durations))
    return out


@pytest.mark.parametrize("method", ["dynamic", "static"])
def test_onnx_int8_vocoder_quality(bundle: ModelBundle, ci_options: BuildOptions, method: str) -> None:
    pytest.importorskip("onnxruntime")
    options = copy.copy(ci_options)
    options.int8_method = method
    options.calibration = [(m,) for m in _mels(bundle, seed=0)]
    engine = build_engine("onnx", "vocoder", bundle.vocoder, CPU, torch.int8, options)
    for mel in _mels(bundle, seed=50):  # fresh inputs, not the calibration ones
        (wav,) = engine(mel)
        with torch.no_grad():
            ref = bundle.vocoder(mel)
        assert wav.shape == ref.shape
        # The tiny random vocoder's output is near-silent noise, a hard case for int8; see BENCHMARKS.md for
        # the shipped model's figure.
        assert log_mel_l1(wav, ref) < 0.5


def test_weight_only_int8_linear_is_close() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    q = Int8WeightOnlyLinear(linear.weight, linear.bias)
    x = torch.randn(5, 64)
    assert q.qweight.dtype == torch.int8
    torch.testing.assert_close(q(x), linear(x), rtol=0, atol=2e-2)


def test_weight_only_int8_acoustic_model_quality(bundle: ModelBundle) -> None:
    quantized = copy.deepcopy(bundle.acoustic)
    assert quantize_weight_only_int8(quantized) > 5
    cfg = bundle.config.acoustic
    inputs = random_inputs([12, 30], cfg.cond_dim, cfg.vocab_size, [80, 200], seed=9).tensors(CPU)
    with torch.no_grad():
        hidden, durations = bundle.acoustic.encode(*inputs)
        q_hidden, _ = quantized.encode(*inputs)
        mel = bundle.acoustic.decode(hidden, durations)
        q_mel = quantized.decode(q_hidden, durations)  # same durations: compare spectra, not timing
    assert (q_mel - mel).abs().mean() < 0.05


def test_half_precision_engines_keep_durations_in_fp32(bundle: ModelBundle) -> None:
    from rtvox.engines.modules import Fp32Island, cast_module, export_module

    net = cast_module(export_module("acoustic_encode", bundle.acoustic.encode), CPU, torch.bfloat16)
    assert isinstance(net.model.variance.duration, Fp32Island)  # type: ignore[union-attr]
    assert net.model.variance.duration.inner.head.weight.dtype == torch.float32  # type: ignore[union-attr]
    assert bundle.acoustic.variance.duration.head.weight.dtype == torch.float32  # the bundle is untouched
    cfg = bundle.config.acoustic
    inputs = random_inputs([15, 33], cfg.cond_dim, cfg.vocab_size, [0, 150], seed=3).tensors(CPU)
    with torch.no_grad():
        _, durations = net(*(t.bfloat16() if t.is_floating_point() else t for t in inputs))
        _, want = bundle.acoustic.encode(*inputs)
    assert (durations - want).abs().max() <= 1  # the input to the island is bf16: at most a rounding flip
    assert int(durations[1].sum()) == 150
    assert quantize_weight_only_int8(net) > 0
    assert net.model.variance.duration.inner.head.weight.dtype == torch.float32  # type: ignore[union-attr]
