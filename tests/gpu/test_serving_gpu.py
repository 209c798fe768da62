"""`rtvox serve`'s GPU defaults on a real GPU (`pytest tests/gpu -q`; skipped without CUDA): with two workers the
captured pipeline runs the vocoder blocks as fused Triton kernels, and what it speaks matches the plain pipeline."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rtvox.engines.quality import log_mel_l1
from rtvox.runtime import Synthesizer
from rtvox.server.config import ServerConfig
from rtvox.server.serve import build_service

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
TEXTS = ("The meeting was moved to three thirty in the afternoon.", "明天天气晴朗，最高气温二十五度。")


def test_two_workers_default_to_fused_kernels_that_speak_as_the_plain_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("RTVOX_PIPELINE_PROFILE", "batch1")  # few buckets: a quick capture
    service: Any = build_service(ServerConfig(device="cuda", workers=2))
    fused = service.synthesizer
    assert fused.backend == "graphs" and fused.fused_frames
    assert fused.pipeline.info["fused_frames"] == ["vocos_blocks"]
    plain = Synthesizer(None, device="cuda", backend="graphs", fused_frames=False)
    assert plain.pipeline is not None and not plain.pipeline.info["fused_frames"]
    for text in TEXTS:
        a, b = fused.synthesize(text).audio, plain.synthesize(text).audio
        assert a.shape == b.shape  # the same durations, so the same length
        assert log_mel_l1(torch.from_numpy(a)[None], torch.from_numpy(b)[None]) <= 0.05
