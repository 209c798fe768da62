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


def test_a_clones_timbre_and_an_emotions_tilt_pass_the_captured_pipeline_as_the_eager_path() -> None:
    """The shipped model on the GPU, captured pipeline (backend graphs) against the per-module eager engines:
    rows with a timbre offset, a tilt and neither in one batch speak alike (log-mel L1 ≤ 0.05 where their lengths
    agree), and the timbre changes the audio."""
    import numpy as np

    from rtvox.runtime.steps import ChunkJob

    graphs = Synthesizer(None, device="cuda", backend="graphs", fused_frames=False)
    eager = Synthesizer(None, device="cuda", backend="eager")
    timbre = np.linspace(-0.5, 0.5, 80, dtype=np.float32)
    emb = graphs.voices.get(graphs.default_voice).embedding
    requests: list[dict[str, Any]] = [
        {"speaker_embedding": emb, "speaker_timbre": timbre},
        {"emotion": "angry"},
        {"speaker_embedding": emb},
    ]
    texts = [TEXTS[0], TEXTS[1], TEXTS[0]]
    got = graphs.run_step([ChunkJob(graphs.prepare(_request(t, r)), 0) for t, r in zip(texts, requests, strict=True)])
    want = eager.run_step([ChunkJob(eager.prepare(_request(t, r)), 0) for t, r in zip(texts, requests, strict=True)])
    compared = 0
    for a, b in zip(got, want, strict=True):
        if a.audio.shape == b.audio.shape:  # TF32 encode may flip a duration's rounding: compare equal lengths
            assert log_mel_l1(torch.from_numpy(a.audio)[None], torch.from_numpy(b.audio)[None]) <= 0.05
            compared += 1
    assert compared >= 2
    assert log_mel_l1(torch.from_numpy(got[0].audio)[None], torch.from_numpy(got[2].audio)[None]) > 0.05


def _request(text: str, fields: dict[str, Any]) -> Any:
    from rtvox.runtime.types import SynthesisRequest

    return SynthesisRequest(text=text, **fields)


def test_a_lead_in_is_cut_alike_on_the_captured_pipeline_and_the_eager_path(tmp_path: Any) -> None:
    """Config `lead_in` on the shipped model (off there: a copy turns it on): the captured pipeline renders the
    lead-in and cuts it as the eager engines do, free and with an exact target."""
    import dataclasses
    import shutil

    from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH
    from rtvox.models.bundle import resolve_model
    from rtvox.training.prosody_prior import update_config

    model = tmp_path / "lead"
    shutil.copytree(resolve_model(None), model)
    update_config(model, lambda c: dataclasses.replace(c, lead_in={"en": "So,"}))
    graphs = Synthesizer(model, device="cuda", backend="graphs", fused_frames=False)
    eager = Synthesizer(model, device="cuda", backend="eager")
    assert graphs.prepare(_request(TEXTS[0], {})).chunks[0].lead == 4
    a, b = graphs.synthesize(TEXTS[0]).audio, eager.synthesize(TEXTS[0]).audio
    if a.shape == b.shape:  # TF32 encode may flip a duration's rounding
        assert log_mel_l1(torch.from_numpy(a)[None], torch.from_numpy(b)[None]) <= 0.05
    for synth in (graphs, eager):
        assert len(synth.synthesize(TEXTS[0], duration=2.5).audio) == round(2.5 * FRAMES_PER_SECOND) * HOP_LENGTH
