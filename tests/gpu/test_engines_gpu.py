"""GPU engines against eager fp32 (run on the H200: `pytest tests/gpu -q`; skipped without CUDA).

Each compiled backend at fp16/bf16 on fresh random inputs of several lengths, judged by the log-mel L1 of the
end-to-end audio (the acceptance metric, ≤ 0.05), plus the fused Triton vocoder kernels compiled.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rtvox.engines.base import BuildOptions, Engine
from rtvox.engines.build import build_engines
from rtvox.engines.quality import log_mel_l1, random_inputs, run_pipeline
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle, make_random_bundle

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
CUDA = torch.device("cuda")
CASES = [([7], [60]), ([40], [0]), ([12, 60], [90, 250])]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    b = make_random_bundle(tmp_path_factory.mktemp("model") / "tiny", preset="tiny", seed=0)
    with torch.no_grad():
        b.acoustic.variance.duration.head.bias.fill_(1.3)
    return b


@pytest.fixture(scope="module")
def eager(bundle: ModelBundle) -> dict[str, Engine]:
    return build_engines(bundle, "eager", "cpu")


@pytest.mark.parametrize(
    ("backend", "dtype"),
    [
        ("inductor", torch.bfloat16),
        ("inductor", torch.float16),
        ("aoti", torch.float16),
        ("aoti", torch.bfloat16),
        ("inductor", torch.int8),
    ],
)
def test_gpu_engine_end_to_end_log_mel(
    bundle: ModelBundle, eager: dict[str, Engine], backend: str, dtype: torch.dtype, tmp_path: Path
) -> None:
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path, mode="reduce-overhead")
    engines = build_engines(bundle, backend, CUDA, dtype, options=options)
    cfg = bundle.config.acoustic
    for seed, (lengths, targets) in enumerate(CASES):
        inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=200 + seed)
        ref, ref_frames = run_pipeline(eager, inputs, torch.device("cpu"))
        # Low precision may flip a duration rounding by one frame; the audio is compared when lengths agree.
        _, durations = engines["acoustic_encode"](*inputs.tensors(CUDA))
        assert (durations.cpu() - eager["acoustic_encode"](*inputs.tensors("cpu"))[1]).abs().max() <= 1
        wav, frames = run_pipeline(engines, inputs, CUDA)
        if torch.equal(frames.cpu(), ref_frames):
            assert log_mel_l1(wav.cpu(), ref) <= 0.05


def test_fused_triton_vocoder_compiled() -> None:
    pytest.importorskip("triton")
    from rtvox.engines.triton_vocoder import FusedHiFiGAN
    from rtvox.models.vocoder import HiFiGAN, VocoderConfig

    torch.manual_seed(0)
    vocoder = HiFiGAN(VocoderConfig.preset("light")).eval().to(CUDA)
    mel = torch.randn(2, 80, 200, device=CUDA) - 4.0
    with torch.inference_mode():
        ref = vocoder(mel)
        got32 = FusedHiFiGAN(vocoder)(mel)  # fp32 inputs: TF32 tensor-core dots
        half = HiFiGAN(VocoderConfig.preset("light")).eval().to(CUDA)
        half.load_state_dict(vocoder.state_dict())
        got16 = FusedHiFiGAN(half.to(torch.bfloat16))(mel.to(torch.bfloat16)).float()
    assert log_mel_l1(got32, ref) <= 0.05
    assert log_mel_l1(got16, ref) <= 0.05


def test_fused_frame_kernels_compiled_bf16() -> None:
    """The serving pipeline with the fused frame-rate kernels (decoder FFNs, Vocos blocks) against eager fp32 on
    the real-size `small` architecture: the same frame counts, log-mel L1 within the bf16 pipeline's bound."""
    pytest.importorskip("triton")
    from rtvox.engines.pipeline import PipelineEngine

    b = make_random_bundle(Path("/tmp/rtvox-gpu-small"), preset="small", seed=0)
    with torch.no_grad():
        b.acoustic.variance.duration.head.bias.fill_(1.3)
    cfg = b.config.acoustic
    inputs = random_inputs([20, 75], cfg.cond_dim, cfg.vocab_size, [0, 300], seed=5)
    profile = ShapeProfile.preset("serve")
    plain = PipelineEngine(b, CUDA, profile, compile_mode=None)
    fused = PipelineEngine(b, CUDA, profile, compile_mode=None, fused_frames=True)
    assert fused.info["fused_frames"] == ["vocos_blocks"]
    ref, ref_frames = PipelineEngine(b, CUDA, profile, dtype=torch.float32, compile_mode=None)(inputs)
    for engine in (plain, fused):
        wav, frames = engine(inputs)
        assert torch.equal(frames, ref_frames)
        assert log_mel_l1(wav.cpu(), ref.cpu()) <= 0.05
