"""`rtvox serve` settings left unset take the device's defaults: the captured pipeline and GPU batching on a GPU,
eager engines and small batches on the CPU; whatever the user sets wins."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import rtvox.runtime.synthesizer as synthesizer_module
from rtvox.constants import (
    FIRST_CHUNK_PHONEMES,
    MAX_CHUNK_PHONEMES,
    MIN_FIRST_CHUNK_PHONEMES,
    PREEMPT_CHUNK_PHONEMES,
)
from rtvox.server.config import ServerConfig
from rtvox.server.serve import build_service


class _FakeSynth:
    def __init__(
        self, model: Any, *, device: str, backend: str, voices_dir: Any = None, fused_frames: bool = False
    ) -> None:
        self.device = torch.device("cuda" if device in ("auto", "cuda") else device)
        self.backend = backend
        self.fused_frames = fused_frames
        self.preemptible = backend != "graphs"  # as Synthesizer's: only the captured pipeline (graphs) has no points


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthesizer_module, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(synthesizer_module, "Synthesizer", _FakeSynth)


def test_gpu_defaults_are_the_serving_load_settings(on_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    service: Any = build_service(ServerConfig())
    assert service.synthesizer.backend == "graphs"
    cfg = service.config
    assert (cfg.max_batch, cfg.first_chunk_wait_ms, cfg.frontend_processes, cfg.fallback_device) == (64, 0.0, 8, "cpu")
    assert cfg.batches_in_flight == 2  # the captured pipeline's launch overlaps the last batch's decode
    assert cfg.max_chunk_phonemes is None and service.max_chunk_phonemes == MAX_CHUNK_PHONEMES  # no preemption
    # no floor under a first chunk on a GPU: a second chunk is made in milliseconds, so it would only delay audio
    assert service.min_first_chunk_phonemes == 0
    assert build_service(ServerConfig(min_first_chunk_phonemes=12)).min_first_chunk_phonemes == 12


def test_settings_given_win_over_the_gpu_defaults(on_gpu: None) -> None:
    config = ServerConfig(backend="eager", max_batch=8, first_chunk_wait_ms=5.0, frontend_processes=0)
    service: Any = build_service(config)
    assert service.synthesizer.backend == "eager"
    cfg = service.config
    assert (cfg.max_batch, cfg.first_chunk_wait_ms, cfg.frontend_processes) == (8, 5.0, 0)
    assert cfg.batches_in_flight == 1  # eager engines: nothing to overlap
    service = build_service(ServerConfig(batches_in_flight=1))
    assert service.config.batches_in_flight == 1


def test_cpu_defaults_are_the_per_module_pick_and_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthesizer_module, "Synthesizer", _FakeSynth)
    service: Any = build_service(ServerConfig(device="cpu"))
    assert service.synthesizer.backend == "auto"  # the engine builder's fastest verified backend per module
    cfg = service.config
    assert (cfg.max_batch, cfg.first_chunk_wait_ms, cfg.frontend_processes, cfg.fallback_device) == (16, None, 0, None)
    assert cfg.batches_in_flight == 1
    # preempted CPU steps: a later chunk's decoder pass is what a new request may wait for, so later chunks are shorter
    assert cfg.preempt_steps and service.max_chunk_phonemes == PREEMPT_CHUNK_PHONEMES
    assert build_service(ServerConfig(device="cpu", max_chunk_phonemes=150)).max_chunk_phonemes == 150
    assert build_service(ServerConfig(device="cpu", preempt_steps=False)).max_chunk_phonemes == MAX_CHUNK_PHONEMES
    assert cfg.first_chunk_phonemes == FIRST_CHUNK_PHONEMES
    assert build_service(ServerConfig(device="cpu", first_chunk_phonemes=24)).config.first_chunk_phonemes == 24
    with pytest.raises(ValueError, match="first_chunk_phonemes"):
        ServerConfig(first_chunk_phonemes=1)
    # the first chunk's floor: the CPU keeps MIN_FIRST_CHUNK_PHONEMES, an explicit value wins, a negative one is refused
    assert service.min_first_chunk_phonemes == MIN_FIRST_CHUNK_PHONEMES
    assert build_service(ServerConfig(device="cpu", min_first_chunk_phonemes=0)).min_first_chunk_phonemes == 0
    # at most half the first chunk's cap, so a punctuation cut can still fire under a small cap
    assert build_service(ServerConfig(device="cpu", first_chunk_phonemes=24)).min_first_chunk_phonemes == 12
    with pytest.raises(ValueError, match="min_first_chunk_phonemes must be ≥ 0"):
        ServerConfig(min_first_chunk_phonemes=-1)


@pytest.mark.parametrize(
    ("workers", "fused", "triton", "expected"),
    [
        (2, None, True, True),  # the measured fast setting (BENCHMARKS.md runs 24-26): on by default
        (None, None, True, False),  # one process: slower at batch 1, off
        (1, None, True, False),
        (2, None, False, False),  # no triton: off, not a crash
        (2, False, True, False),  # the operator's word wins
        (1, True, True, True),
    ],
)
def test_fused_kernels_follow_the_workers_on_a_gpu(
    on_gpu: None, monkeypatch: pytest.MonkeyPatch, workers: int | None, fused: bool | None, triton: bool, expected: bool
) -> None:
    import rtvox.server.serve as serve_module

    monkeypatch.setattr(serve_module, "_have_triton", lambda: triton)
    service: Any = build_service(ServerConfig(workers=workers, fused_kernels=fused))
    assert service.synthesizer.fused_frames is expected


def test_fused_kernels_stay_off_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthesizer_module, "Synthesizer", _FakeSynth)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    service: Any = build_service(ServerConfig(device="cpu", workers=2))
    assert service.synthesizer.fused_frames is False


def test_uvicorn_runs_the_server_on_the_c_parser_and_loop() -> None:
    """`rtvox serve` leaves uvicorn's http and loop on auto; with the installed httptools and uvloop that is the
    faster stack (the HTTP layer's cost per request a fifth lower than h11 on asyncio: BENCHMARKS.md)."""
    import asyncio

    import uvicorn
    import uvloop

    config = uvicorn.Config(app=lambda scope, receive, send: None, http="auto", loop="auto")
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop) and isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()
