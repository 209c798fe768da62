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
