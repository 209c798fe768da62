"""TTSService end to end on a tiny random model: equivalence with the Synthesizer, batching, limits, deadlines,
cancellation, fault injection with the CPU fallback. No timing assertions: blocking engines make order explicit."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import torch

from rtvox.constants import MAX_CHUNK_PHONEMES, MIN_FIRST_CHUNK_PHONEMES, PREEMPT_CHUNK_PHONEMES
from rtvox.engines import Engine
from rtvox.errors import TextError
from rtvox.runtime import Synthesizer
from rtvox.runtime.sched_types import DeadlineExceededError, EngineFailedError, QueueFullError
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest

T = TypeVar("T")

TEXTS = [
    "你好，欢迎使用 rtvox。This is a quick demo of mixed Chinese and English speech, with several chunks of text.",
    "Hi.",
    "今天天气很好，我们去公园散步吧。然后回家吃饭，晚上看一本书。",
    "The quick brown fox jumps over the lazy dog, again and again, until the sun goes down.",
    "Good morning.",
    "一二三四五六七八九十。",
]
NO_FALLBACK = ServiceConfig(fallback_device=None)


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(main())  # type: ignore[arg-type]


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert float(np.max(np.abs(got - want))) <= 1e-4 * max(float(np.max(np.abs(want))), 1e-6)


class GatedEngine:
    """Wraps an engine; blocks every call until `gate` is set (lets a test hold a batch in flight)."""

    def __init__(self, inner: Engine) -> None:
        self.inner, self.gate, self.entered = inner, threading.Event(), threading.Event()
        self.module, self.backend, self.device, self.dtype = inner.module, inner.backend, inner.device, inner.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.entered.set()
        assert self.gate.wait(30), "test gate never opened"
        return self.inner(*inputs)


class FlakyEngine:
    """Wraps an engine; raises a (fake) CUDA out-of-memory error on the listed call numbers (1-based)."""

    def __init__(self, inner: Engine, fail_on: set[int] | None = None) -> None:
        self.inner, self.fail_on, self.calls = inner, fail_on, 0
        self.module, self.backend, self.device, self.dtype = inner.module, inner.backend, inner.device, inner.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.calls += 1
        if self.fail_on is None or self.calls in self.fail_on:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return self.inner(*inputs)


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> Synthesizer:
    """The one-shot Synthesizer the services are compared with, reading text as they do: a CPU service preempts
    its steps and so cuts later chunks at PREEMPT_CHUNK_PHONEMES (the library's default is MAX_CHUNK_PHONEMES),
    and holds first chunks to MIN_FIRST_CHUNK_PHONEMES (the library's default: no floor)."""
    synth = Synthesizer(tiny_model, device="cpu")
    synth.frontend.process = functools.partial(  # type: ignore[method-assign]
        synth.frontend.process,
        max_chunk_phonemes=PREEMPT_CHUNK_PHONEMES,
        min_first_chunk_phonemes=MIN_FIRST_CHUNK_PHONEMES,
    )
    return synth


def new_synth(tiny_model: Path) -> Synthesizer:
    return Synthesizer(tiny_model, device="cpu")


async def wait_until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(3000):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_concurrent_streams_equal_the_synthesizer(tiny_model: Path, reference: Synthesizer) -> None:
    settings: list[dict[str, Any]] = [
        {"voice": "anna"},
        {"voice": "ben", "speed": 1.4},
        {"emotion": "sad", "pitch_scale": 1.3},
        {"duration": 2.5},
        {"energy_scale": 0.5},
        {"emotion": "happy", "emotion_alpha": 0.5},
    ]

    async def main() -> None:
        service = TTSService(new_synth(tiny_model), NO_FALLBACK)
        await service.start()
        assert service.ready
        requests = [SynthesisRequest(text=t, **s) for t, s in zip(TEXTS, settings, strict=True)]
        results = await asyncio.gather(*(service.synthesize(r) for r in requests))
        for text, setting, result in zip(TEXTS, settings, results, strict=True):
            want = reference.synthesize(text, **setting)
            assert [c.index for c in result.chunks] == list(range(len(want.chunks)))
            assert result.chunks[-1].is_last and not any(c.is_last for c in result.chunks[:-1])
            for got_chunk, want_chunk in zip(result.chunks, want.chunks, strict=True):
                assert got_chunk.durations == want_chunk.durations
            close(result.audio, want.audio)
        stats = service.stats()
        assert stats["requests"]["ok"] == len(TEXTS) and stats["ttfa"]["count"] == len(TEXTS)
        assert sum(n * k for n, k in stats["batch_size_histogram"].items()) == sum(len(r.chunks) for r in results)
        assert service.health()["admitted"] == 0
        await service.stop()
        await service.stop()  # idempotent
        assert not service.ready and service.health()["status"] == "stopped"

    run(main)


def test_chunks_of_many_requests_share_a_batch_up_to_max_batch(tiny_model: Path, reference: Synthesizer) -> None:
    short = ["Hi.", "Yes.", "No.", "Good.", "Okay.", "Fine."]
    counts = {len(reference.prepare(SynthesisRequest(text=t)).chunks[0].ids) for t in short}
    assert max(counts) <= 16  # one length bucket, one chunk each

    async def main() -> None:
        # A wait far longer than the test: only a full batch can be released, so batches of 3 prove batching.
        service = TTSService(
            new_synth(tiny_model), ServiceConfig(max_batch=3, max_wait_ms=60_000, fallback_device=None)
        )
        await service.start()
        results = await asyncio.gather(*(service.synthesize(SynthesisRequest(text=t)) for t in short))
        assert service.stats()["batch_size_histogram"] == {3: 2}
        for text, result in zip(short, results, strict=True):
            close(result.audio, reference.synthesize(text).audio)
        await service.stop()

    run(main)


def test_limits_are_refused_with_a_clear_error(tiny_model: Path) -> None:
    async def main() -> None:
        config = ServiceConfig(max_chars=50, max_phonemes=40, max_realtime_audio_s=2.0, fallback_device=None)
        service = TTSService(new_synth(tiny_model), config)
        await service.start()
        with pytest.raises(TextError, match="over this server's limit of 50"):
            service.stream(SynthesisRequest(text="x" * 51))
        with pytest.raises(TextError, match="phonemes, over this server's limit of 40"):
            await service.synthesize(SynthesisRequest(text=TEXTS[3][:50]))
        with pytest.raises(TextError, match="streaming limit of 2 s"):
            await service.synthesize(SynthesisRequest(text="Hello there, how are you.", duration=3.0))
        with pytest.raises(TextError, match="nothing to speak"):
            await service.synthesize(SynthesisRequest(text="。。"))
        assert (await service.synthesize(SynthesisRequest(text="Hi."))).seconds > 0
        assert service.stats()["requests"]["invalid"] == 4 and service.health()["admitted"] == 0
        await service.stop()

    run(main)


def test_deadline_cancels_cleanly_while_a_batch_is_stuck(tiny_model: Path, reference: Synthesizer) -> None:
    async def main() -> None:
        synth = new_synth(tiny_model)
        service = TTSService(synth, NO_FALLBACK)
        await service.start()
        gated = GatedEngine(synth.engines["vocoder"])
        synth.engines["vocoder"] = gated
        with pytest.raises(DeadlineExceededError, match=r"deadline of 0\.3 s"):
            await service.synthesize(SynthesisRequest(text=TEXTS[0]), deadline_s=0.3)
        assert gated.entered.is_set()  # it expired while its batch was in the engine
        health = service.health()
        assert health["admitted"] == 0 and health["queue_depth"] == 0 and health["running"] == 0
        modules = health["engines"]["primary"]["modules"]  # what each module runs on, for the operator
        assert modules == {
            "acoustic_encode": "eager-float32",
            "acoustic_decode": "eager-float32",
            "vocoder": "eager-float32",
        }
        gated.gate.set()  # the stuck batch finishes; its result is dropped, the service goes on
        result = await service.synthesize(SynthesisRequest(text="Hi."))
        close(result.audio, reference.synthesize("Hi.").audio)
        # ended once: by the stream's own timer (a cancel in the scheduler) or by the loop's expire(), which runs
        # while a step is in flight when steps are preemptible (the loop no longer awaits a batch inline)
        scheduler = service.stats()["scheduler"]
        assert service.stats()["requests"]["expired"] == 1 and scheduler["expired"] + scheduler["cancelled"] == 1
        await service.stop()

    run(main)


@pytest.mark.parametrize("depth", [1, 2])
def test_batches_in_flight_bounds_the_steps_handed_to_the_executor(
    tiny_model: Path, reference: Synthesizer, depth: int
) -> None:
    """While a step is held, the loop hands the executor at most `batches_in_flight` batches: with 2, requests
    that arrive meanwhile form the next batch at once; with 1 they wait. Every stream equals the Synthesizer's.
    (Without preempt_steps, which lets one batch of first chunks more overtake: tested below.)"""

    async def main() -> None:
        config = ServiceConfig(batches_in_flight=depth, max_wait_ms=0, fallback_device=None, preempt_steps=False)
        service = TTSService(new_synth(tiny_model), config)
        await service.start()
        assert service._executor is not None
        real_run, gate, calls = service._executor.run, asyncio.Event(), []

        async def held_run(jobs: Any, **kwargs: Any) -> Any:
            calls.append(len(jobs))
            await gate.wait()
            return await real_run(jobs, **kwargs)

        service._executor.run = held_run  # type: ignore[method-assign]
        first = asyncio.create_task(service.synthesize(SynthesisRequest(text=TEXTS[1])))
        await wait_until(lambda: len(calls) == 1, "the first batch to reach the executor")
        others = [asyncio.create_task(service.synthesize(SynthesisRequest(text=t))) for t in TEXTS[3:5]]
        if depth == 2:
            await wait_until(lambda: len(calls) == 2, "a second batch handed over while one runs")
            assert service.stats()["scheduler"]["in_flight_batches"] == 2
        else:
            await wait_until(lambda: service.health()["queue_depth"] == 2, "both later requests queued")
            assert len(calls) == 1 and service.stats()["scheduler"]["in_flight_batches"] == 1
        gate.set()
        results = await asyncio.gather(first, *others)
        for text, result in zip([TEXTS[1], *TEXTS[3:5]], results, strict=True):
            close(result.audio, reference.synthesize(text).audio)
        assert service.health()["admitted"] == 0
        await service.stop()

    run(main)


def test_prepare_on_the_host_falls_back_to_the_engine_thread_on_an_unexpected_error(
    tiny_model: Path, reference: Synthesizer
) -> None:
    """A CPU synthesizer prepares plain requests on the event loop; if that raises something other than an
    input error the request is prepared again through the engine thread's path and still served."""

    async def main() -> None:
        synth = new_synth(tiny_model)
        assert synth.prepares_on_host(SynthesisRequest(text="Hi."))
        assert not synth.prepares_on_host(SynthesisRequest(text="Hi.", duration=1.0))
        service = TTSService(synth, NO_FALLBACK)
        await service.start()
        real, calls = synth.condition, []

        def flaky(request: SynthesisRequest) -> torch.Tensor:
            calls.append(request.text)
            if len(calls) == 1:
                raise RuntimeError("injected")
            return real(request)

        synth.condition = flaky  # type: ignore[method-assign]
        result = await service.synthesize(SynthesisRequest(text="Hi."))
        close(result.audio, reference.synthesize("Hi.").audio)
        assert len(calls) == 2 and service.health()["engines"]["primary"]["faults"] == 0
        await service.stop()

    run(main)


def test_closing_a_stream_early_frees_its_slot_at_once(tiny_model: Path) -> None:
    async def main() -> None:
        synth = new_synth(tiny_model)
        service = TTSService(synth, NO_FALLBACK)
        await service.start()
        stream = service.stream(SynthesisRequest(text=TEXTS[0]))
        first = await anext(stream)  # type: ignore[call-overload]
        assert first.index == 0 and not first.is_last
        assert service.health()["admitted"] == 1
        await stream.aclose()  # type: ignore[attr-defined]
        health = service.health()
        assert health["admitted"] == 0 and health["running"] == 0
        # a consumer task cancelled mid-stream (client disconnect) is cleaned up the same way
        gated = GatedEngine(synth.engines["vocoder"])
        synth.engines["vocoder"] = gated

        async def consume() -> None:
            async for _ in service.stream(SynthesisRequest(text=TEXTS[2])):
                pass

        task = asyncio.create_task(consume())
        await wait_until(gated.entered.is_set, "the batch to reach the engine")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert service.health()["admitted"] == 0 and service.health()["running"] == 0
        gated.gate.set()
        assert (await service.synthesize(SynthesisRequest(text="Hi."))).seconds > 0
        stats = service.stats()
        assert stats["requests"]["cancelled"] == 2 and stats["scheduler"]["cancelled"] == 2
        await service.stop()

    run(main)


def test_full_queue_refuses_with_a_retry_hint(tiny_model: Path) -> None:
    async def main() -> None:
        synth = new_synth(tiny_model)
        service = TTSService(synth, ServiceConfig(max_queue=2, fallback_device=None))
        await service.start()
        gated = GatedEngine(synth.engines["vocoder"])
        synth.engines["vocoder"] = gated
        tasks = [asyncio.create_task(service.synthesize(SynthesisRequest(text=t))) for t in TEXTS[:2]]
        await wait_until(lambda: service.health()["admitted"] == 2, "two admitted requests")
        with pytest.raises(QueueFullError) as info:
            service.stream(SynthesisRequest(text="Hi."))
        assert info.value.retry_after_s >= 1 and "retry after" in str(info.value)
        gated.gate.set()
        assert all(r.seconds > 0 for r in await asyncio.gather(*tasks))
        assert service.stats()["requests"] == {**service.stats()["requests"], "ok": 2, "rejected": 1}
        await service.stop()

    run(main)


@pytest.mark.parametrize("module", ["vocoder", "acoustic_decode"])
def test_engine_fault_mid_stream_reruns_on_fallback_with_correct_audio(
    tiny_model: Path, reference: Synthesizer, module: str
) -> None:
    async def main() -> None:
        primary = new_synth(tiny_model)
        service = TTSService(primary, ServiceConfig(max_batch=4), fallback=new_synth(tiny_model))
        await service.start()
        # The 3rd call fails: some chunks of these requests were already delivered from the primary.
        primary.engines[module] = FlakyEngine(primary.engines[module], fail_on={3})
        texts = TEXTS * 2
        results = await asyncio.gather(*(service.synthesize(SynthesisRequest(text=t)) for t in texts))
        for text, result in zip(texts, results, strict=True):
            close(result.audio, reference.synthesize(text).audio)  # nothing lost, nothing corrupted
        stats, health = service.stats(), service.health()
        assert stats["requests"]["ok"] == len(texts) and stats["fallback_steps"] >= 1
        assert health["engines"]["primary"]["faults"] == 1
        assert "OutOfMemoryError" in health["engines"]["primary"]["error"]
        # rebuilt in the background (the flaky wrapper is gone), then healthy and serving again
        await wait_until(lambda: service.health()["engines"]["primary"]["healthy"], "the primary rebuild")
        assert service.health()["status"] == "ok" and service.health()["engines"]["primary"]["rebuilds"] == 1
        steps = service.health()["engines"]["primary"]["steps"]
        close((await service.synthesize(SynthesisRequest(text=TEXTS[1]))).audio, reference.synthesize(TEXTS[1]).audio)
        assert service.health()["engines"]["primary"]["steps"] > steps
        await service.stop()

    run(main)


def test_health_is_degraded_while_the_primary_is_broken(tiny_model: Path) -> None:
    async def main() -> None:
        primary = new_synth(tiny_model)
        service = TTSService(primary, ServiceConfig(), fallback=new_synth(tiny_model))
        await service.start()
        primary.engines["vocoder"] = FlakyEngine(primary.engines["vocoder"])  # fails every call
        gate = threading.Event()
        real_build = primary.build_engines

        def slow_rebuild() -> None:  # keep the primary broken until the test has looked at health()
            assert gate.wait(30)
            real_build()

        primary.build_engines = slow_rebuild  # type: ignore[method-assign]
        result = await service.synthesize(SynthesisRequest(text=TEXTS[0]))
        assert result.seconds > 0
        health = service.health()
        assert health["status"] == "degraded" and not health["engines"]["primary"]["healthy"]
        assert health["engines"]["fallback"]["healthy"] and service.ready
        gate.set()
        await wait_until(lambda: service.health()["status"] == "ok", "recovery")
        await service.stop()

    run(main)


def test_without_fallback_every_request_ends_with_an_error_not_silence(tiny_model: Path) -> None:
    async def main() -> None:
        primary = new_synth(tiny_model)
        service = TTSService(primary, NO_FALLBACK)
        await service.start()
        primary.engines["acoustic_encode"] = FlakyEngine(primary.engines["acoustic_encode"])
        primary.build_engines = lambda: (_ for _ in ()).throw(RuntimeError("GPU gone"))  # type: ignore[method-assign]
        outcomes = await asyncio.gather(
            *(service.synthesize(SynthesisRequest(text=t)) for t in TEXTS), return_exceptions=True
        )
        assert all(isinstance(o, EngineFailedError) for o in outcomes), outcomes
        stats = service.stats()
        assert stats["requests"]["failed"] == len(TEXTS) and service.health()["admitted"] == 0
        assert service.health()["status"] == "degraded"
        await service.stop()

    run(main)


def fail_once(fn: Callable[..., T]) -> Callable[..., T]:
    """fn, except that its first call raises a (fake) CUDA out-of-memory error."""
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> T:
        calls[0] += 1
        if calls[0] == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return fn(*args, **kwargs)

    return wrapped


@pytest.mark.parametrize("depth", [1, 2])
def test_graphs_backend_and_frontend_processes_serve_like_the_synthesizer(
    tiny_model: Path, reference: Synthesizer, monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    """The GPU serving configuration on the CPU: the captured-pipeline backend (ci profile: batches split, long
    chunks on the eager engines) and the frontend in two worker processes give every stream the reference's
    chunks; when the pipeline raises mid-run the step is re-run on the fallback and nothing is lost. With two
    batches in flight the steps are split (launch on the engine thread, finish on another)."""
    monkeypatch.setenv("RTVOX_PIPELINE_PROFILE", "ci")

    async def main() -> None:
        synth = Synthesizer(tiny_model, device="cpu", backend="graphs")
        config = ServiceConfig(  # the reference's chunking (a graphs service's own cap would be MAX_CHUNK_PHONEMES)
            max_wait_ms=5.0,
            frontend_processes=2,
            fallback_device="cpu",
            batches_in_flight=depth,
            max_chunk_phonemes=PREEMPT_CHUNK_PHONEMES,
        )
        service = TTSService(synth, config)
        await service.start()
        requests = [SynthesisRequest(text=t, voice=v) for t, v in zip(TEXTS, ["anna", "ben"] * 3, strict=True)]
        for round_ in range(2):
            if round_ == 1:  # the pipeline fails once: that step goes to the CPU fallback
                assert synth.pipeline is not None
                synth.pipeline.launch_rows = fail_once(synth.pipeline.launch_rows)  # type: ignore[method-assign]
            results = await asyncio.gather(*(service.synthesize(r) for r in requests))
            for request, result in zip(requests, results, strict=True):
                want = reference.synthesize(request.text, voice=request.voice)
                assert len(result.chunks) == len(want.chunks)
                for got_chunk, want_chunk in zip(result.chunks, want.chunks, strict=True):
                    assert got_chunk.durations == want_chunk.durations
                    assert got_chunk.audio.shape == want_chunk.audio.shape
                    close(got_chunk.audio, want_chunk.audio)  # to the chunk's end: one end silence on every path
        stats = service.stats()
        assert stats["requests"]["ok"] == 2 * len(TEXTS) and stats["fallback_steps"] >= 1
        assert service._executor is not None and service._executor.split_steps == (depth > 1)
        primary = service.health()["engines"]["primary"]
        assert primary["backend"] == "graphs"  # the captured programs are what serve, and /health says so
        assert primary["modules"] == {
            "acoustic_encode": "graphs-float32",
            "acoustic_decode": "graphs-float32",  # bf16 on a GPU; the CPU pipeline keeps the synthesizer's dtype
            "vocoder": "graphs-float32",
        }
        assert primary["outside_profile"] == dict.fromkeys(primary["modules"], "eager-float32")
        await service.stop()

    run(main)


@pytest.mark.parametrize("interval_ms", [0.5, None])
def test_gil_switch_interval_is_set_while_serving_and_restored_at_stop(
    tiny_model: Path, interval_ms: float | None
) -> None:
    import sys

    before = sys.getswitchinterval()

    async def main() -> None:
        service = TTSService(
            new_synth(tiny_model), ServiceConfig(fallback_device=None, gil_switch_interval_ms=interval_ms)
        )
        await service.start()
        want = before if interval_ms is None else interval_ms / 1000.0
        assert sys.getswitchinterval() == pytest.approx(want)
        assert (await service.synthesize(SynthesisRequest(text="Hi."))).seconds > 0
        await service.stop()
        assert sys.getswitchinterval() == pytest.approx(before)

    run(main)
    with pytest.raises(ValueError, match="gil_switch_interval_ms must be > 0"):
        ServiceConfig(gil_switch_interval_ms=0)


class SlowEngine:
    """Wraps an engine; every call takes at least `delay` seconds (a loaded server, for deadline tests)."""

    def __init__(self, inner: Engine, delay: float) -> None:
        self.inner, self.delay = inner, delay
        self.module, self.backend, self.device, self.dtype = inner.module, inner.backend, inner.device, inner.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        threading.Event().wait(self.delay)
        return self.inner(*inputs)


@pytest.mark.parametrize("follows", [True, False])
def test_a_stream_that_keeps_ahead_of_playback_outlives_its_deadline(tiny_model: Path, follows: bool) -> None:
    """Each delivered chunk moves the deadline later by its audio seconds (the default): a long text whose
    chunks each take 0.25 s to make but carry ~0.55 s of audio finishes, although the whole takes longer than
    the 0.8-s budget; with the rule off the same request expires."""

    async def main() -> None:
        synth = new_synth(tiny_model)
        config = ServiceConfig(max_wait_ms=0, fallback_device=None, deadline_follows_audio=follows)
        service = TTSService(synth, config)
        await service.start()
        synth.engines["vocoder"] = SlowEngine(synth.engines["vocoder"], 0.25)
        text = " ".join([TEXTS[3]] * 6)
        if follows:
            started = time.monotonic()
            result = await service.synthesize(SynthesisRequest(text=text), deadline_s=0.8)
            assert len(result.chunks) >= 4 and time.monotonic() - started > 0.8  # took longer than the budget
        else:
            with pytest.raises(DeadlineExceededError):
                await service.synthesize(SynthesisRequest(text=text), deadline_s=0.8)
        assert service.health()["admitted"] == 0
        await service.stop()

    run(main)


def test_internal_renders_are_served_but_left_out_of_the_request_metrics(
    tiny_model: Path, reference: Synthesizer
) -> None:
    """A clone's calibration renders (the server's own work) take the same queue and engines, but an operator's
    request counts, TTFA and delivered audio show only what clients asked for."""

    async def main() -> None:
        service = TTSService(new_synth(tiny_model), ServiceConfig(fallback_device=None))
        await service.start()
        request = SynthesisRequest(text=TEXTS[0])
        own = await service.synthesize(request, internal=True)
        close(own.audio, reference.synthesize_request(request).audio)
        stats = service.stats()
        assert stats["internal_renders"] == 1 and stats["chunks_delivered"] == 0
        assert sum(stats["requests"].values()) == 0 and stats["ttfa"]["count"] == 0
        asked = await service.synthesize(request)
        close(asked.audio, own.audio)
        stats = service.stats()
        assert stats["requests"]["ok"] == 1 and stats["ttfa"]["count"] == 1 and stats["internal_renders"] == 1
        assert stats["audio_seconds_delivered"] == pytest.approx(asked.seconds)
        await service.stop()

    run(main)


@pytest.mark.parametrize("error", ["input", "unexpected"])
def test_a_step_that_raises_fails_its_requests_and_the_service_goes_on(tiny_model: Path, error: str) -> None:
    """An InputError from inside an engine step (it once was a chunk past a compiled engine's shape profile), or
    any exception the executor does not expect, reaches the batch's requests; the batching loop lives on, so the
    next request is served and /ready stays true (the loop used to die silently: every later request hung)."""
    from rtvox.errors import InputError

    async def main() -> None:
        synth = new_synth(tiny_model)
        service = TTSService(synth, NO_FALLBACK)
        await service.start()
        vocoder = synth.engines["vocoder"]
        calls = 0

        class Once:  # the vocoder engine, raising at its first call
            backend, dtype = vocoder.backend, vocoder.dtype  # type: ignore[attr-defined]

            def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
                nonlocal calls
                calls += 1
                if calls == 1:
                    raise InputError("frames length 4688 exceeds the engine's shape profile (max 4096)")
                return vocoder(*inputs)

        if error == "input":
            synth.engines["vocoder"] = Once()  # type: ignore[assignment]
            expected: type[Exception] = InputError
        else:  # something past the executor's fault handling: the step itself raising from the service's view
            real_run = service._executor.run  # type: ignore[union-attr]

            async def broken_run(jobs: Any, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                if calls == 1:
                    raise KeyError("a bug")
                return await real_run(jobs, **kwargs)

            service._executor.run = broken_run  # type: ignore[union-attr,method-assign]
            expected = EngineFailedError
        with pytest.raises(expected):
            await asyncio.wait_for(service.synthesize(SynthesisRequest(text=TEXTS[0])), 60)
        assert service.ready and service.health()["status"] == "ok"
        result = await asyncio.wait_for(service.synthesize(SynthesisRequest(text="Hi.")), 60)
        assert result.audio.size > 0
        assert service.health()["admitted"] == 0
        await service.stop()

    run(main)


@pytest.mark.parametrize(("frontend_processes", "first"), [(0, 48), (1, 48), (0, 12), (1, 12)])
def test_chunk_caps_reach_the_frontend_and_the_audio_is_the_same_text_chunked_so(
    tiny_model: Path, reference: Synthesizer, frontend_processes: int, first: int
) -> None:
    """ServiceConfig.max_chunk_phonemes and first_chunk_phonemes reach the frontend (its thread or a worker
    process): the first chunk holds at most `first` phonemes and later ones at most the cap, so a long text streams
    in more, shorter steps, each the reference's chunk of the text split at the same caps."""
    cap = 24
    text = " ".join(TEXTS[3] for _ in range(3))  # its first phrase is longer than 12 phonemes
    front = reference.frontend.process(text, max_chunk_phonemes=cap, first_chunk_phonemes=first)
    default = reference.frontend.process(text)
    assert len(front.chunks) > len(default.chunks)
    assert len(front.chunks[0].phonemes) <= first and all(len(c.phonemes) <= cap for c in front.chunks[1:])
    if first < 48:
        assert len(front.chunks[0].phonemes) < len(default.chunks[0].phonemes)
    prepared = reference.prepare(SynthesisRequest(text=text), front)
    want = [reference.run_step([ChunkJob(prepared, i)])[0] for i in range(len(prepared.chunks))]

    async def main() -> None:
        config = ServiceConfig(
            max_chunk_phonemes=cap,
            first_chunk_phonemes=first,
            frontend_processes=frontend_processes,
            fallback_device=None,
        )
        service = TTSService(new_synth(tiny_model), config)
        await service.start()
        result = await service.synthesize(SynthesisRequest(text=text))
        await service.stop()
        assert len(result.chunks) == len(want)
        for got_chunk, want_chunk in zip(result.chunks, want, strict=True):
            assert got_chunk.durations == want_chunk.durations
            close(got_chunk.audio, want_chunk.audio)

    run(main)


@pytest.mark.parametrize(("frontend_processes", "floor"), [(0, None), (0, 0), (1, 0)])
def test_the_first_chunk_floor_reaches_the_frontend(
    tiny_model: Path, reference: Synthesizer, frontend_processes: int, floor: int | None
) -> None:
    """ServiceConfig.min_first_chunk_phonemes reaches the frontend (its thread or a worker process): a reply that
    opens with "Yes," starts on that word alone without a floor, and on a CPU service with the default floor its
    first chunk runs on to a later punctuation mark, at least MIN_FIRST_CHUNK_PHONEMES long."""
    text = "Yes, the quick brown fox jumps over the lazy dog, again and again. " + TEXTS[3]
    opening = reference.frontend.process("Yes,").chunks[0].phonemes

    async def main() -> list[int]:
        config = ServiceConfig(
            min_first_chunk_phonemes=floor, frontend_processes=frontend_processes, fallback_device=None
        )
        service = TTSService(new_synth(tiny_model), config)
        await service.start()
        assert service.min_first_chunk_phonemes == (MIN_FIRST_CHUNK_PHONEMES if floor is None else floor)
        result = await service.synthesize(SynthesisRequest(text=text))
        await service.stop()
        return [len(chunk.durations) for chunk in result.chunks]

    sizes = run(main)
    if floor == 0:
        assert sizes[0] == len(opening)
    else:
        assert sizes[0] >= MIN_FIRST_CHUNK_PHONEMES
    assert sum(sizes) == len(reference.frontend.phonemize(text))


@pytest.mark.parametrize("caps", [{"max_chunk_phonemes": 1}, {"first_chunk_phonemes": 0}])
def test_chunk_caps_below_two_are_refused(caps: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="first_chunk_phonemes must be at least 2"):
        ServiceConfig(**caps)


class ArmedGate:
    """Wraps an engine; once armed, its next call blocks until `gate` is set (later calls go straight through)."""

    def __init__(self, inner: Engine) -> None:
        self.inner, self.gate, self.entered, self.armed = inner, threading.Event(), threading.Event(), False
        self.module, self.backend, self.device, self.dtype = inner.module, inner.backend, inner.device, inner.dtype

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.gate.wait(30), "test gate never opened"
        return self.inner(*inputs)


@pytest.mark.parametrize("preempt", [True, False])
def test_a_first_chunk_overtakes_a_later_chunk_in_progress(
    tiny_model: Path, reference: Synthesizer, preempt: bool
) -> None:
    """A long request's second chunk is held inside its decoder; a request that arrives meanwhile gets its first
    chunk at that step's next preemption point, before the held chunk is delivered (preempt_steps), or only after
    it (without). Every stream still equals the Synthesizer's."""

    async def main() -> None:
        synth = new_synth(tiny_model)
        service = TTSService(synth, ServiceConfig(fallback_device=None, max_wait_ms=0, preempt_steps=preempt))
        await service.start()
        assert service.max_chunk_phonemes == (PREEMPT_CHUNK_PHONEMES if preempt else MAX_CHUNK_PHONEMES)
        gated = ArmedGate(synth.engines["acoustic_decode"])
        synth.engines["acoustic_decode"] = gated
        real_step = synth.run_step

        def step(jobs: Any) -> Any:  # on the engine thread: the step of the long request's second chunk is held
            if any(job.index == 1 for job in jobs):
                gated.armed = True
            return real_step(jobs)

        synth.run_step = step  # type: ignore[method-assign]
        events: list[tuple[str, int]] = []
        audio: dict[str, list[np.ndarray]] = {"long": [], "short": []}

        async def listen(name: str, text: str) -> None:
            async for chunk in service.stream(SynthesisRequest(text=text)):
                events.append((name, chunk.index))
                audio[name].append(chunk.audio)

        long_task = asyncio.create_task(listen("long", TEXTS[0]))
        await wait_until(gated.entered.is_set, "the long request's second chunk in its decoder")
        short_task = asyncio.create_task(listen("short", TEXTS[1]))
        if preempt:  # the short request's first chunk is handed over beside the held step
            await wait_until(lambda: service.stats()["scheduler"]["in_flight_batches"] == 2, "an overtaking batch")
        else:
            await wait_until(lambda: service.health()["queue_depth"] == 1, "the short request queued")
            assert service.stats()["scheduler"]["in_flight_batches"] == 1
        gated.gate.set()
        await asyncio.gather(long_task, short_task)
        order = [e for e in events if e in {("long", 1), ("short", 0)}]
        assert order == ([("short", 0), ("long", 1)] if preempt else [("long", 1), ("short", 0)])
        assert service.health()["engines"]["primary"]["preemptions"] == (1 if preempt else 0)
        for name, text in (("long", TEXTS[0]), ("short", TEXTS[1])):  # the reference cut at the service's cap
            front = reference.frontend.process(text, max_chunk_phonemes=service.max_chunk_phonemes)
            prepared = reference.prepare(SynthesisRequest(text=text), front)
            want = [reference.run_step([ChunkJob(prepared, i)])[0].audio for i in range(len(prepared.chunks))]
            close(np.concatenate(audio[name]), np.concatenate(want))
        await service.stop()

    run(main)
