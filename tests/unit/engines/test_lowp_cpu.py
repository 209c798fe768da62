"""Eager fp16/bf16 engines (a cast copy, fp32 islands, fp32 outputs) and `auto`'s per-module CPU picks."""

from __future__ import annotations

import pytest
import torch

from rtvox.engines import build_engine
from rtvox.engines.build import auto_order, build_engines, cpu_has_native_bf16
from rtvox.engines.modules import Fp32Island
from rtvox.engines.quality import log_mel_l1, random_inputs, run_pipeline
from rtvox.models.bundle import ModelBundle

from .conftest import CPU


def test_eager_bf16_keeps_the_islands_fp32_and_answers_in_fp32(bundle: ModelBundle) -> None:
    engines = build_engines(bundle, "eager", CPU, torch.bfloat16)
    cfg = bundle.config.acoustic
    inputs = random_inputs([7, 30], cfg.cond_dim, cfg.vocab_size, [60, 180], seed=4)
    hidden, durations = engines["acoustic_encode"](*inputs.tensors(CPU))
    assert hidden.dtype == torch.float32 and durations.dtype == torch.long
    (mel,) = engines["acoustic_decode"](hidden, durations)
    (wav,) = engines["vocoder"](mel)
    assert mel.dtype == wav.dtype == torch.float32
    # The bundle's own modules are untouched: the engine runs a copy.
    assert next(bundle.acoustic.parameters()).dtype == torch.float32
    ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU)
    got, frames = run_pipeline(engines, inputs, CPU)
    assert torch.equal(frames, ref_frames)  # exact targets: bf16 cannot move the row lengths
    # The tiny random model speaks near-DC noise, where log-mel distance means little; compare samples (the
    # trained model's log-mel L1 is in BENCHMARKS.md).
    assert float((got - ref).abs().max()) < 0.03 * float(ref.abs().max())


def test_vocos_head_and_output_norm_stay_fp32_in_bf16() -> None:
    from rtvox.models.vocos import Vocos, VocosConfig

    torch.manual_seed(0)
    vocos = Vocos(VocosConfig.preset("tiny")).eval()
    engine = build_engine("eager", "vocoder", vocos, CPU, torch.bfloat16)
    net = engine._fn  # type: ignore[attr-defined]
    assert isinstance(net.head, Fp32Island) and isinstance(net.norm_out, Fp32Island)
    assert net.blocks[0].pw1.weight.dtype == torch.bfloat16
    assert net.head.inner.basis.dtype == torch.float32
    mel = torch.randn(1, 80, 50)
    (wav,) = engine(mel)
    with torch.no_grad():
        ref = vocos(mel)
    assert wav.dtype == torch.float32 and wav.shape == ref.shape
    assert log_mel_l1(wav, ref) < 0.1


def test_auto_picks_per_module_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTVOX_CPU_BF16", "1")
    assert cpu_has_native_bf16()
    assert auto_order(CPU, "acoustic_decode")[0] == ("eager", torch.bfloat16)
    assert auto_order(CPU, "vocoder")[0] == ("eager", torch.bfloat16)
    assert auto_order(CPU, "acoustic_encode")[0] == ("onnx", torch.float32)  # bf16 would move durations
    monkeypatch.setenv("RTVOX_CPU_BF16", "0")
    assert not cpu_has_native_bf16()
    assert auto_order(CPU, "acoustic_decode")[0] == ("onnx", torch.float32)
    assert auto_order(CPU, "vocoder")[0] == ("eager", torch.float32)  # eager Vocos beats its ONNX graph
    assert all(d == torch.float32 for _, d in auto_order(CPU, "acoustic_decode"))


def test_auto_keeps_the_encoder_fp32_on_cuda() -> None:
    cuda = torch.device("cuda")
    assert auto_order(cuda, "acoustic_encode")[0] == ("inductor", torch.float32)
    assert auto_order(cuda, "vocoder")[0] == ("inductor", torch.bfloat16)
