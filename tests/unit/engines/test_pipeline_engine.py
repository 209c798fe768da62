"""PipelineEngine (two captured programs per bucket; the GPU fast path) against the eager engines, on the CPU
where its programs run uncaptured: same frame counts, the same audio up to the bucket padding's reach."""

from __future__ import annotations

import copy

import pytest
import torch

from rtvox.constants import HOP_LENGTH
from rtvox.engines.build import build_engines
from rtvox.engines.pipeline import PipelineEngine
from rtvox.engines.quality import random_inputs, run_pipeline
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle
from rtvox.runtime.streaming import context_frames_for

from .conftest import CPU

# (row lengths, exact frame targets; 0 = the model's own durations): one row, ragged batches of two.
CASES = [([11], [70]), ([5, 14], [40, 120]), ([9, 30], [0, 0])]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fp32_pipeline_matches_eager(bundle: ModelBundle, case: int) -> None:
    lengths, targets = CASES[case]
    cfg = bundle.config.acoustic
    inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=7 + case)
    engine = PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
    wav, frames = engine(inputs)
    ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU)
    assert torch.equal(frames, ref_frames)
    assert wav.shape == ref.shape and wav.dtype == torch.float32
    # The vocoder sees silence frames up to the frame bucket where eager stops at the longest row: only the
    # last receptive field of samples may differ.
    keep = ref.shape[1] - context_frames_for(bundle.vocoder) * HOP_LENGTH
    torch.testing.assert_close(wav[:, :keep], ref[:, :keep], rtol=0, atol=1e-4)
    for row, n in enumerate(frames.tolist()):
        assert not wav[row, n * HOP_LENGTH :].any()  # nothing past a row's own length


def test_bf16_pipeline_is_close_and_reuses_its_buckets(bundle: ModelBundle) -> None:
    cfg = bundle.config.acoustic
    engine = PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), compile_mode=None)
    for seed, (lengths, targets) in enumerate(CASES[:2]):
        inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=30 + seed)
        wav, frames = engine(inputs)
        ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU)
        assert torch.equal(frames, ref_frames)  # the encoder runs in fp32: durations are eager's
        keep = ref.shape[1] - context_frames_for(bundle.vocoder) * HOP_LENGTH
        assert float((wav - ref)[:, :keep].abs().max()) < 0.05 * float(ref.abs().max())
    engine(random_inputs([12], cfg.cond_dim, cfg.vocab_size, [60], seed=99))
    assert set(engine._slots) == {(1, 16), (2, 16)}  # (batch, phoneme) buckets of the ci profile
    with pytest.raises(Exception, match="phonemes"):
        engine(random_inputs([65], cfg.cond_dim, cfg.vocab_size, [60], seed=1))  # past the profile


def test_encoder_weights_kept_in_fp16_compute_like_fp32(bundle: ModelBundle) -> None:
    """Weights fp16 holds exactly (as the shipped fp16 safetensors are) stay fp16 on the device and give the
    fp32 encoder's results; a weight fp16 would round is left in fp32."""
    from rtvox.engines.modules import store_weights_fp16

    half_bundle = copy.deepcopy(bundle)
    with torch.no_grad():
        for param in half_bundle.acoustic.parameters():
            param.copy_(param.half().float())
    cfg = bundle.config.acoustic
    inputs = random_inputs([9, 20], cfg.cond_dim, cfg.vocab_size, [0, 0], seed=5)
    stored = PipelineEngine(half_bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
    plain = PipelineEngine(
        half_bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None, encode_weights_fp16=False
    )
    assert stored.info["encode_weights_fp16_mb"] > 0
    dtypes = {t.dtype for t in stored.encoder.state_dict().values() if t.numel() >= 4096}
    assert dtypes == {torch.float16}
    (wav_a, frames_a), (wav_b, frames_b) = stored(inputs), plain(inputs)
    assert torch.equal(frames_a, frames_b)
    torch.testing.assert_close(wav_a, wav_b, rtol=0, atol=1e-6)
    # a weight fp16 would round stays fp32; one it holds exactly is stored
    layer = torch.nn.Linear(128, 128)
    assert store_weights_fp16(layer) == 0 and layer.weight.dtype == torch.float32
    with torch.no_grad():
        layer.weight.copy_(layer.weight.half().float())
    assert store_weights_fp16(layer) == 128 * 128 * 2 and layer.weight.dtype == torch.float32
    assert layer.parametrizations.weight.original.dtype == torch.float16
