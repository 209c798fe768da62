"""The primary engines in their own process (ServiceConfig.engine_process): the same audio as in-process serving,
a dead engine process fails over to the host-side fallback and is restarted, a failed start says why."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rtvox.constants import MIN_FIRST_CHUNK_PHONEMES
from rtvox.runtime import Synthesizer
from rtvox.runtime.engine_process import EngineProcess, EngineProcessError, job_row, parse_spec, row_job
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest

TEXTS = [
    "你好，欢迎使用 rtvox。This is a quick demo of mixed Chinese and English speech, with several chunks of text.",
    "Hi.",
    "今天天气很好，我们去公园散步吧。然后回家吃饭，晚上看一本书。",
    "The quick brown fox jumps over the lazy dog, again and again.",
]
SETTINGS: list[dict[str, Any]] = [
    {"voice": "anna"},
    {"voice": "ben", "speed": 1.4},
    {"emotion": "sad", "pitch_scale": 1.3, "energy_scale": 0.7},
    {"duration": 2.5},
]


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert float(np.max(np.abs(got - want))) <= 1e-4 * max(float(np.max(np.abs(want))), 1e-6)


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> Synthesizer:
    """The one-shot Synthesizer the services are held to, reading text as a service on the CPU does: first
    chunks held to MIN_FIRST_CHUNK_PHONEMES (the library's default: no floor)."""
    synth = Synthesizer(tiny_model, device="cpu")
    synth.frontend.process = functools.partial(  # type: ignore[method-assign]
        synth.frontend.process, min_first_chunk_phonemes=MIN_FIRST_CHUNK_PHONEMES
    )
    return synth


def test_a_row_carries_what_a_chunk_step_reads(reference: Synthesizer) -> None:
    timbre = np.linspace(-0.5, 0.5, 80, dtype=np.float32)
    prepared = reference.prepare(
        SynthesisRequest(text=TEXTS[0], speed=1.2, emotion="happy", duration=6.0, speaker_timbre=timbre)
    )
    assert prepared.timbre is not None
    job = ChunkJob(prepared, 1)
    back = row_job(job_row(job))
    chunk, got = prepared.chunks[1], back.prepared.chunks[back.index]
    assert got.ids == chunk.ids and got.target_frames == chunk.target_frames
    assert torch.equal(back.prepared.cond, prepared.cond.float())
    assert back.prepared.prosody == tuple(prepared.prosody) and back.prepared.tilt == prepared.tilt
    assert back.prepared.timbre is not None and np.array_equal(back.prepared.timbre, timbre)
    request = back.prepared.request
    assert (request.speed, request.duration) == (1.2, 6.0) and request.text == ""
    # the engine process's step equals the parent's on the same job (frames per id, audio)
    want, out = reference.run_step([job])[0], reference.run_step([back])[0]
    close(out.audio, want.audio)
    assert chunk.phoneme_durations(out.durations) == want.durations


def test_engine_process_serves_like_the_synthesizer_and_survives_its_death(
    tiny_model: Path, reference: Synthesizer
) -> None:
    async def main() -> None:
        config = ServiceConfig(engine_process="cpu:eager", fallback_device="cpu", default_deadline_s=None)
        service = TTSService(Synthesizer(tiny_model, device="cpu"), config)
        await service.start()
        assert service.ready
        assert service._executor is not None
        primary = service._executor.primary
        assert isinstance(primary.synth, EngineProcess) and primary.synth.alive
        requests = [SynthesisRequest(text=t, **s) for t, s in zip(TEXTS, SETTINGS, strict=True)]
        results = await asyncio.gather(*(service.synthesize(r) for r in requests))
        for text, setting, result in zip(TEXTS, SETTINGS, results, strict=True):
            want = reference.synthesize(text, **setting)
            for got_chunk, want_chunk in zip(result.chunks, want.chunks, strict=True):
                assert got_chunk.durations == want_chunk.durations and got_chunk.text == want_chunk.text
            assert result.chunks[-1].is_last
            close(result.audio, want.audio)
        assert primary.steps > 0 and service._executor.fallback_steps == 0

        primary.synth._proc.kill()  # the engine process dies between steps
        primary.synth._proc.join(10)
        result = await service.synthesize(SynthesisRequest(text=TEXTS[3]))  # served by the fallback
        close(result.audio, reference.synthesize(TEXTS[3]).audio)
        assert primary.faults == 1 and "died" in str(primary.error)
        assert service._executor.fallback_steps >= 1
        for _ in range(600):  # the rebuild restarts the process
            if primary.healthy:
                break
            await asyncio.sleep(0.1)
        assert primary.healthy and primary.rebuilds == 1 and primary.synth.alive
        steps = primary.steps
        close((await service.synthesize(SynthesisRequest(text=TEXTS[1]))).audio, reference.synthesize(TEXTS[1]).audio)
        assert primary.steps > steps  # back on the (new) engine process
        await service.stop()
        assert not primary.synth.alive

    asyncio.run(main())


def test_an_engine_process_that_cannot_start_says_why(tiny_model: Path, tmp_path: Path) -> None:
    process = EngineProcess(tmp_path / "no-model", "cpu", "eager", Synthesizer(tiny_model, device="cpu"))
    with pytest.raises(EngineProcessError, match=r"failed to start: .*no-model"):
        process.start()
    assert not process.alive
    with pytest.raises(EngineProcessError, match="not running"):
        process.run_step([])


def test_rtvox_serve_engine_process_keeps_the_server_side_on_the_cpu(tiny_model: Path, reference: Synthesizer) -> None:
    from rtvox.server.config import ServerConfig
    from rtvox.server.serve import build_service

    # unset, the backend is the device's default (here the CPU's per-module pick) and goes to the engine process
    default = build_service(ServerConfig(model=str(tiny_model), engine_process=True))
    assert isinstance(default, TTSService) and default.config.engine_process == "auto:auto"
    # eager, so the audio can be held to the eager reference exactly
    service = build_service(ServerConfig(model=str(tiny_model), engine_process=True, backend="eager"))
    assert isinstance(service, TTSService)
    assert service.synthesizer.device.type == "cpu" and service.synthesizer.backend == "eager"
    assert service.config.engine_process == "auto:eager" and service.config.fallback_device == "cpu"

    async def main() -> None:
        await service.start()
        assert service._executor is not None and isinstance(service._executor.primary.synth, EngineProcess)
        result = await service.synthesize(SynthesisRequest(text=TEXTS[1], voice="ben"))
        close(result.audio, reference.synthesize(TEXTS[1], voice="ben").audio)
        assert service.health()["engines"]["primary"]["steps"] >= 1
        await service.stop()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cpu", ("cpu", "auto")),
        ("cpu:eager", ("cpu", "eager")),
        ("cuda", ("cuda", "auto")),
        ("cuda:graphs", ("cuda", "graphs")),
        ("cuda:1", ("cuda:1", "auto")),  # an indexed device is not a backend named "1"
        ("cuda:1:graphs", ("cuda:1", "graphs")),  # what `rtvox serve --device cuda:1 --engine-process` asks for
    ],
)
def test_engine_process_specs_keep_the_device_index(spec: str, expected: tuple[str, str]) -> None:
    assert parse_spec(spec) == expected
