"""The AR family's Synthesizer path on CUDA (static decode steps captured as CUDA graphs): exact lengths, and a
batched step equal to each job alone (run on the H200: `pytest tests/gpu -q`; skipped without CUDA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH
from rtvox.models.ar_bundle import make_random_ar_bundle
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest
from rtvox.text import Vocabulary

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_cuda_graph_decode_gives_exact_lengths_and_batch_invariant_rows(tmp_path: Path) -> None:
    make_random_ar_bundle(tmp_path / "ar", Vocabulary.default().to_dict(), skip_symbols=("#1", "#2"))
    synth = Synthesizer(tmp_path / "ar", device="cuda")
    assert synth._ar_step is not None and synth._ar_step.decoder.runner.static_step is not None
    result = synth.synthesize("你好，欢迎使用 rtvox。This is a quick demo.", duration=1.3, seed=4)
    assert len(result.audio) == round(1.3 * FRAMES_PER_SECOND) * HOP_LENGTH and np.isfinite(result.audio).all()
    texts = ["Hi there.", "今天天气很好，我们去公园散步吧。", "The quick brown fox jumps over the lazy dog."]
    # token-count mode (a duration per request): random weights in free mode may say eos at once
    requests = [SynthesisRequest(text=t, seed=i, duration=1.0 + 0.4 * i) for i, t in enumerate(texts)]
    jobs = [ChunkJob(synth.prepare(r), 0) for r in requests]
    for job, out in zip(jobs, synth.run_step(jobs), strict=True):
        (alone,) = synth.run_step([job])
        assert out.audio.shape == alone.audio.shape and out.audio.size > 0
        peak = max(float(np.abs(alone.audio).max()), 1e-6)
        assert float(np.abs(out.audio - alone.audio).max()) <= 1e-3 * peak


@pytest.mark.parametrize("advances", [0, 4])
@pytest.mark.parametrize("batch", [1, 5, 16])
def test_fused_triton_decode_is_as_close_to_fp32_as_eager_bf16(batch: int, advances: int) -> None:
    """rtvox.engines.ar_fused compiled, bf16, captured in a CUDA graph (StaticDecodeStep), against the fp32 paged
    forward: its logits are no further from fp32 than the eager bf16 forward's (batch 1: the GEMV path; 5 and 16:
    the tensor-core path), and replays give identical logits — for plain codes and for phoneme-pointer tokens
    (`advances` 4: the fed token's embedding gets its three pointer rows, as the trained family's)."""
    pytest.importorskip("triton")
    from rtvox.models.ar import ARConfig, ARDecoder, PagedKVCache
    from rtvox.runtime.ar import StaticDecodeStep

    torch.manual_seed(batch)
    cfg = ARConfig.preset("small", dim=256, heads=4, layers=4, advances=advances)
    ref = ARDecoder(cfg).cuda().eval()
    low = ARDecoder(cfg).cuda().eval()
    low.load_state_dict(ref.state_dict())
    low = low.to(torch.bfloat16)
    bs, per_seq = 16, 8
    caches = {}
    for name, dtype in (("fp32", torch.float32), ("eager", torch.bfloat16), ("fused", torch.bfloat16)):
        caches[name] = PagedKVCache(cfg, batch * per_seq + 1, bs, torch.device("cuda"), dtype)
    gen = torch.Generator().manual_seed(0)
    keys = torch.randn(caches["fp32"].k.shape, generator=gen).to("cuda", torch.bfloat16)
    values = torch.randn(caches["fp32"].v.shape, generator=gen).to("cuda", torch.bfloat16)
    for cache in caches.values():  # the same (bf16-representable) history in every cache
        cache.k.copy_(keys)
        cache.v.copy_(values)
    positions = [int(p) for p in torch.randint(0, per_seq * bs - 1, (batch,), generator=gen).tolist()]
    tables = [list(range(b * per_seq, (b + 1) * per_seq)) for b in range(batch)]
    last = [int(c) for c in torch.randint(0, cfg.n_codes, (batch,), generator=gen).tolist()]
    pointers = None
    if advances:  # each row somewhere in its own random phonemes
        rows = torch.randint(1, cfg.text_vocab, (batch, 30), generator=gen).tolist()
        at = torch.randint(0, 30, (batch,), generator=gen).tolist()
        pointers = [ARDecoder.pointer_triple(r, p) for r, p in zip(rows, at, strict=True)]
    with torch.no_grad():
        want = StaticDecodeStep(ref, caches["fp32"])(last, positions, tables, pointers).float()
        eager = StaticDecodeStep(low, caches["eager"])(last, positions, tables, pointers).float()
        step = StaticDecodeStep(low, caches["fused"], cuda_graph=True, kernels="triton")
        got = step(last, positions, tables, pointers).float()
        again = [step(last, positions, tables, pointers).float() for _ in range(3)]  # replays of the captured graph
    assert all(torch.equal(got, a) for a in again)
    eager_err = float((eager - want).abs().max())
    fused_err = float((got - want).abs().max())
    assert fused_err <= 1.5 * eager_err + 1e-3, (fused_err, eager_err)
    assert float((caches["fused"].k - caches["eager"].k).abs().max()) <= 0.1  # new keys written, bf16 rounding
