"""Serving load benchmark: N concurrent streaming listeners against a TTSService, plus a one-at-a-time baseline.

For each concurrency level N, N listeners loop for `level_duration_s`: start at a uniform phase of their mean cycle
(steady state), then send a request whose text length follows a log-normal distribution of chat-reply lengths (mixed
zh and en), read the stream, wait until its audio has played out and an exponential think time (so arrivals are
Poisson; N is the number of concurrent real-time streams, not N clients hammering the server). Per stream we record
TTFA (request sent → first chunk), the real-time factor (wall time / audio time) and whether playback started at the
first chunk would ever stall. A level passes when no stream stalls and P99 TTFA <= the target; the result names the
largest passing N. The baseline serves the same kind of requests one at a time straight through
`Synthesizer.stream`, so throughput under load can be compared with serial serving on the same machine in the same
run. `run_load_bench` returns a JSON-able result.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from rtvox.runtime.engine_process import EngineProcess
from rtvox.runtime.executor import warm_up
from rtvox.runtime.service import ServiceConfig, TTSService, first_chunk_floor, later_chunk_cap, preempts
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest

EN_SENTENCES = (
    "Thanks for calling, how can I help you today?",
    "Your order has shipped and should arrive on Thursday.",
    "The meeting was moved to three thirty in the afternoon.",
    "Please hold on while I look that up for you.",
    "It will be mostly sunny tomorrow, with a light breeze from the west.",
    "I have added the milk, eggs and bread to your shopping list.",
    "Turn left at the next intersection, then continue for two hundred meters.",
    "That is a great question, and the short answer is yes.",
)
ZH_SENTENCES = (
    "您好，请问有什么可以帮您？",
    "您的订单已经发货，预计周四送达。",
    "明天天气晴朗，最高气温二十五度。",
    "会议改到下午三点半，请准时参加。",
    "好的，我已经帮您把提醒设置在早上七点。",
    "前方路口左转，然后继续直行两百米。",
    "这个问题很好，简单来说答案是肯定的。",
    "请稍等，我马上为您查询相关信息。",
)
# Speaking rates used to give the untrained placeholder model realistic audio lengths (it predicts ~1 frame per
# phoneme); the vocoder's cost scales with audio length, so without this the load would be unrealistically light.
EN_CHARS_PER_SECOND = 15.0
ZH_CHARS_PER_SECOND = 4.5
TEXT_MEDIAN_CHARS = 80.0  # median reply length (log-normal), clipped to [TEXT_MIN_CHARS, TEXT_MAX_CHARS]
TEXT_SIGMA = 0.6
STALLS_KEPT = 5  # stalled streams' timelines a level's result keeps
TEXT_MIN_CHARS, TEXT_MAX_CHARS = 12, 400


@dataclass(frozen=True)
class BenchText:
    text: str
    seconds: float  # realistic speaking time of the text (used as the target duration when asked)


def make_texts(n: int, seed: int) -> list[BenchText]:
    """`n` texts of realistic lengths, half English, half Mandarin, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    texts = []
    for i in range(n):
        target = float(np.clip(rng.lognormal(np.log(TEXT_MEDIAN_CHARS), TEXT_SIGMA), TEXT_MIN_CHARS, TEXT_MAX_CHARS))
        zh = i % 2 == 1
        pool = ZH_SENTENCES if zh else EN_SENTENCES
        # Mandarin carries ~3x the content per character: scale its character budget down accordingly.
        budget = target / 3 if zh else target
        parts: list[str] = []
        while not parts or sum(len(p) for p in parts) < budget:
            parts.append(pool[int(rng.integers(len(pool)))])
        text = ("" if zh else " ").join(parts)
        seconds = len(text) / (ZH_CHARS_PER_SECOND if zh else EN_CHARS_PER_SECOND)
        texts.append(BenchText(text, seconds))
    return texts


@dataclass(frozen=True)
class StreamRecord:
    ttfa_s: float  # request sent → first chunk received
    audio_s: float  # audio seconds in the stream
    wall_s: float  # request sent → last chunk received
    stalled: bool  # playback started at the first chunk would have run dry before some later chunk arrived
    # a stalled stream's chunks, each (arrival s after the request, audio s, ms it came after it was needed):
    # what ran dry and by how much (None for a stream that did not stall)
    timeline: tuple[tuple[float, float, float], ...] | None = None

    @property
    def rtf(self) -> float:
        return self.wall_s / self.audio_s if self.audio_s > 0 else float("inf")


@dataclass
class LevelResult:
    concurrency: int  # clients
    streams: int  # streams completed within the level
    errors: int  # streams that ended with an error
    ttfa_p50_ms: float
    ttfa_p99_ms: float
    rtf_p50: float  # per-stream wall time / audio time, median
    rtf_max: float  # worst stream
    stalled_streams: int
    audio_s_per_s: float  # throughput: audio seconds delivered per wall second
    passed: bool  # no stall, no error, P99 TTFA within target
    batch_size_histogram: dict[int, int] = field(default_factory=dict)
    # the primary engine thread over the level: share of wall time busy (steps, prepares), share in steps, and
    # the mean step (host and device together): near 1 the engine thread is the limit, well below it the rest
    engine_busy: float = float("nan")
    engine_in_steps: float = float("nan")
    step_ms_mean: float = float("nan")
    # the captured pipeline's device spans over the level (graphs backend on CUDA; NaN elsewhere): share of wall
    # time the device spent inside steps' encode and decode spans, and their means per step (DeviceSpans)
    device_busy: float = float("nan")
    device_encode_ms_mean: float = float("nan")
    device_decode_ms_mean: float = float("nan")
    # the engine thread's wall ms per step by phase (prep, launch_encode, wait_encode, launch_decode, d2h, chunks)
    host_ms_per_step: dict[str, float] = field(default_factory=dict)
    # the first few stalled streams' timelines (StreamRecord.timeline): which chunk came late, and by how much
    stalls: list[tuple[tuple[float, float, float], ...]] = field(default_factory=list)
    # with several service processes on one device (`service_processes` > 1): each process's own figures
    # (clients, streams, audio_s_per_s, engine and device fields); the fields above are over all of them, the device
    # ones summed (device_busy is then the sum of each process's spans, which overlap where the device time-slices
    # between them: an upper bound, not a share)
    processes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class LoadBenchResult:
    machine: dict[str, Any]
    settings: dict[str, Any]
    baseline: dict[str, float]  # one at a time: ttfa_p50_ms, ttfa_p99_ms, rtf_p50, audio_s_per_s, requests
    levels: list[LevelResult]
    max_realtime_streams: int  # largest N that passed (0 if none)
    throughput_vs_baseline: float  # best audio_s_per_s (levels and saturation) / the baseline's
    # closed-loop clients that send their next request as soon as a stream ends (no playback, no think time):
    # the service's throughput under saturating load (None: not run)
    saturation: LevelResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ListenerPlan:
    """A level's random draws, whatever carries the requests: each client's first text, its think times and the
    phase it starts at. Listeners start in steady state, each at a uniform phase of its mean cycle (audio + think
    time, at most half the level so every client starts within a short one), so a level does not open with all N
    requests at once; closed-loop clients start at once."""

    offsets: np.ndarray  # [clients]: index of each client's first text
    think: np.ndarray  # [clients, k]: exponential think times, used in turn
    phase: np.ndarray  # [clients]: seconds before a listener's first request

    @classmethod
    def draw(
        cls, rng: np.random.Generator, texts: Sequence[BenchText], clients: int, duration_s: float, think_s: float
    ) -> ListenerPlan:
        offsets = rng.integers(0, len(texts), size=clients)
        think = rng.exponential(think_s, size=(clients, 10_000))
        cycle = min(float(np.mean([t.seconds for t in texts])) + think_s, duration_s / 2)
        return cls(offsets, think, rng.uniform(0.0, cycle, size=clients))

    def text(self, texts: Sequence[BenchText], client: int, n: int) -> BenchText:
        """The client's n-th text (a stride through the pool, so clients do not repeat one another)."""
        return texts[(int(self.offsets[client]) + n * 7919) % len(texts)]

    def start_delay(self, client: int, listen: bool) -> float:
        return float(self.phase[client]) if listen else 0.0

    def think_s(self, client: int, n: int) -> float:
        return float(self.think[client, n % self.think.shape[1]])


def _percentile_ms(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q) * 1000.0) if values else float("nan")


def stream_record(t0: float, arrivals: Sequence[float], seconds: Sequence[float]) -> StreamRecord:
    """A finished stream's record from its chunks' arrival times and audio seconds (request sent at t0)."""
    # Playback starts when chunk 0 arrives; chunk k is needed once chunks 0..k-1 have played.
    late = np.asarray(arrivals) - (arrivals[0] + np.cumsum([0.0, *seconds[:-1]]))
    stalled = bool(np.any(late > 1e-3))
    timeline = None
    if stalled:
        timeline = tuple(
            (round(a - t0, 4), round(float(s), 3), round(float(d) * 1e3, 1))
            for a, s, d in zip(arrivals, seconds, late, strict=True)
        )
    return StreamRecord(arrivals[0] - t0, sum(seconds), arrivals[-1] - t0, stalled, timeline)


def _request(item: BenchText, realistic_durations: bool) -> SynthesisRequest:
    duration = min(max(item.seconds, 0.5), 110.0) if realistic_durations else None
    return SynthesisRequest(text=item.text, duration=duration)


def run_baseline(synth: Synthesizer, texts: Sequence[BenchText], realistic_durations: bool) -> dict[str, float]:
    """Serve the texts one after another through the plain Synthesizer path."""
    records = []
    start = time.perf_counter()
    for item in texts:
        t0 = time.perf_counter()
        arrivals, seconds = [], []
        for chunk in synth.stream_request(_request(item, realistic_durations)):
            arrivals.append(time.perf_counter())
            seconds.append(chunk.seconds)
        records.append(stream_record(t0, arrivals, seconds))
    return baseline_figures(records, time.perf_counter() - start)


def baseline_figures(records: Sequence[StreamRecord], wall_s: float) -> dict[str, float]:
    """The one-at-a-time baseline's figures: requests, TTFA P50/P99, median RTF, audio seconds per second."""
    return {
        "requests": float(len(records)),
        "ttfa_p50_ms": _percentile_ms([r.ttfa_s for r in records], 50),
        "ttfa_p99_ms": _percentile_ms([r.ttfa_s for r in records], 99),
        "rtf_p50": float(np.median([r.rtf for r in records])),
        "audio_s_per_s": sum(r.audio_s for r in records) / wall_s,
    }


async def _run_level(
    service: TTSService,
    texts: Sequence[BenchText],
    concurrency: int,
    duration_s: float,
    think_time_s: float,
    realistic_durations: bool,
    rng: np.random.Generator,
    listen: bool = True,
) -> tuple[list[StreamRecord], int, float]:
    records: list[StreamRecord] = []
    errors = 0
    end = time.perf_counter() + duration_s
    plan = ListenerPlan.draw(rng, texts, concurrency, duration_s, think_time_s)

    async def client(index: int) -> None:
        nonlocal errors
        n = 0
        await asyncio.sleep(plan.start_delay(index, listen))
        while time.perf_counter() < end:
            item = plan.text(texts, index, n)
            t0 = time.perf_counter()
            arrivals, seconds = [], []
            try:
                async for chunk in service.stream(_request(item, realistic_durations), deadline_s=None):
                    arrivals.append(time.perf_counter())
                    seconds.append(chunk.seconds)
            except Exception:  # counted, not raised: a failed stream fails the level
                errors += 1
            else:
                records.append(stream_record(t0, arrivals, seconds))
                # A listener: the next request comes after this one has played out, then a think time.
                if listen:
                    await asyncio.sleep(max(0.0, arrivals[0] + sum(seconds) - time.perf_counter()))
            n += 1
            if listen:
                await asyncio.sleep(plan.think_s(index, n))

    start = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return records, errors, time.perf_counter() - start


def _device_spans(service: TTSService) -> dict[str, float] | None:
    """The primary engines' DeviceSpans totals, in this process or in the engine process."""
    assert service._executor is not None
    engines = service._executor.primary.synth
    if isinstance(engines, EngineProcess):
        return engines.device_spans()
    pipeline = getattr(engines, "pipeline", None)
    return pipeline.spans.totals() if pipeline is not None and pipeline.spans is not None else None


def _device_use(before: dict[str, float] | None, after: dict[str, float] | None, wall: float) -> dict[str, Any]:
    """LevelResult's device fields from two DeviceSpans totals (empty when the backend keeps none)."""
    if before is None or after is None:
        return {}
    steps = max(1.0, after["steps"] - before["steps"])
    encode, decode = after["encode_s"] - before["encode_s"], after["decode_s"] - before["decode_s"]
    host = {
        key.removeprefix("host_").removesuffix("_s"): round((value - before.get(key, 0.0)) / steps * 1000.0, 3)
        for key, value in after.items()
        if key.startswith("host_")
    }
    return {
        "device_busy": (encode + decode) / wall,
        "device_encode_ms_mean": encode / steps * 1000.0,
        "device_decode_ms_mean": decode / steps * 1000.0,
        "host_ms_per_step": host,
    }


async def _serve_level(
    synth: Synthesizer,
    config: ServiceConfig,
    engine_process: EngineProcess | None,
    texts: Sequence[BenchText],
    n: int,
    level_duration_s: float,
    think_time_s: float,
    realistic_durations: bool,
    rng: np.random.Generator,
    listen: bool,
    start_at: float | None = None,
) -> dict[str, Any]:
    """One level on a fresh TTSService over `synth` (clients start at wall-clock `start_at`, if given): the raw
    figures `_merge_level` folds into a LevelResult (plain types, so a worker process can send them)."""
    service = TTSService(synth, config, engine_process=engine_process)
    await service.start()
    if start_at is not None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
    spans_before = _device_spans(service)
    records, errors, wall = await _run_level(
        service, texts, n, level_duration_s, think_time_s, realistic_durations, rng, listen
    )
    hist = service.stats()["batch_size_histogram"]
    primary = service.health()["engines"]["primary"]
    device = _device_use(spans_before, _device_spans(service), wall)
    await service.stop()
    return {
        "clients": n,
        "records": [(r.ttfa_s, r.audio_s, r.wall_s, r.stalled, r.timeline) for r in records],
        "errors": errors,
        "wall_s": wall,
        "histogram": {int(k): int(v) for k, v in hist.items()},
        "busy_s": float(primary["busy_s"]),
        "step_s": float(primary["step_s"]),
        "steps": int(primary["steps"]),
        "device": device,
    }


def _merge_level(n: int, parts: Sequence[dict[str, Any]], ttfa_p99_target_s: float) -> LevelResult:
    """A LevelResult over the raw figures of one service process or several that served the level together."""
    records = [StreamRecord(*r) for part in parts for r in part["records"]]
    errors = sum(int(part["errors"]) for part in parts)
    wall = max(float(part["wall_s"]) for part in parts)
    hist: dict[int, int] = {}
    for part in parts:
        for size, count in part["histogram"].items():
            hist[int(size)] = hist.get(int(size), 0) + int(count)
    device: dict[str, Any] = dict(parts[0]["device"]) if len(parts) == 1 else {}
    if len(parts) > 1 and all(part["device"] for part in parts):
        device = {
            "device_busy": sum(part["device"]["device_busy"] for part in parts),
            "device_encode_ms_mean": float(np.mean([part["device"]["device_encode_ms_mean"] for part in parts])),
            "device_decode_ms_mean": float(np.mean([part["device"]["device_decode_ms_mean"] for part in parts])),
        }
    per_process = []
    if len(parts) > 1:
        for part in parts:
            audio = sum(r[1] for r in part["records"])
            per_process.append(
                {
                    "clients": part["clients"],
                    "streams": len(part["records"]),
                    "errors": part["errors"],
                    "audio_s_per_s": audio / part["wall_s"],
                    "engine_busy": part["busy_s"] / part["wall_s"],
                    "step_ms_mean": part["step_s"] / max(1, part["steps"]) * 1000.0,
                    **part["device"],
                }
            )
    steps = sum(int(part["steps"]) for part in parts)
    return level_result(
        n,
        records,
        errors,
        wall,
        ttfa_p99_target_s,
        batch_size_histogram=dict(sorted(hist.items())),
        engine_busy=float(np.mean([part["busy_s"] / part["wall_s"] for part in parts])),
        engine_in_steps=float(np.mean([part["step_s"] / part["wall_s"] for part in parts])),
        step_ms_mean=sum(float(part["step_s"]) for part in parts) / max(1, steps) * 1000.0,
        processes=per_process,
        **device,
    )


def level_result(
    n: int, records: Sequence[StreamRecord], errors: int, wall_s: float, ttfa_p99_target_s: float, **extra: Any
) -> LevelResult:
    """A level's figures from its streams; it passes with streams, no error, no stall and P99 TTFA on target.
    `extra`: the LevelResult fields only a service in this process can fill (engine and device figures)."""
    ttfa = [r.ttfa_s for r in records]
    p99 = _percentile_ms(ttfa, 99)
    return LevelResult(
        concurrency=n,
        streams=len(records),
        errors=errors,
        ttfa_p50_ms=_percentile_ms(ttfa, 50),
        ttfa_p99_ms=p99,
        rtf_p50=float(np.median([r.rtf for r in records])) if records else float("nan"),
        rtf_max=max((r.rtf for r in records), default=float("nan")),
        stalled_streams=sum(r.stalled for r in records),
        audio_s_per_s=sum(r.audio_s for r in records) / wall_s,
        passed=bool(records) and errors == 0 and not any(r.stalled for r in records) and p99 <= ttfa_p99_target_s * 1e3,
        stalls=[r.timeline for r in records if r.timeline is not None][:STALLS_KEPT],
        **extra,
    )


def bench_result(
    machine: dict[str, Any],
    settings: dict[str, Any],
    baseline: dict[str, float],
    levels: list[LevelResult],
    saturation: LevelResult | None,
) -> LoadBenchResult:
    """The run's result: the largest passing level, and the best throughput against the one-at-a-time baseline."""
    passing = [lv.concurrency for lv in levels if lv.passed]
    best = max((lv.audio_s_per_s for lv in [*levels, *([saturation] if saturation else [])]), default=0.0)
    return LoadBenchResult(
        machine=machine,
        settings=settings,
        baseline=baseline,
        levels=levels,
        max_realtime_streams=max(passing, default=0),
        throughput_vs_baseline=best / baseline["audio_s_per_s"] if baseline["audio_s_per_s"] > 0 else 0.0,
        saturation=saturation,
    )


def plan_settings(
    levels: Sequence[int],
    level_duration_s: float,
    think_time_s: float,
    ttfa_p99_target_s: float,
    baseline_requests: int,
    realistic_durations: bool,
    saturation_clients: int,
    seed: int,
) -> dict[str, Any]:
    """The settings every load bench records (in-process and over HTTP): the levels, the pass bound, the baseline."""
    return {
        "levels": list(levels),
        "level_duration_s": level_duration_s,
        "think_time_s": think_time_s,
        "ttfa_p99_target_ms": ttfa_p99_target_s * 1000.0,
        "baseline_requests": baseline_requests,
        "realistic_durations": realistic_durations,
        "saturation_clients": saturation_clients,
        "seed": seed,
    }


def even_shares(n: int, parts: int) -> list[int]:
    """n clients split over `parts` processes as evenly as whole numbers allow: even_shares(5, 3) == [2, 2, 1]."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


class _ServiceWorkers:
    """`count` service processes (spawned) on the model and device of `synth`, each with its own engines; a
    level goes to all of them at once, the clients split evenly, started at one wall-clock moment."""

    def __init__(self, count: int, synth: Synthesizer, config: ServiceConfig, seed: int) -> None:
        self.count = count
        self.args = (str(synth.model_dir), str(synth.device), synth.backend, config, seed)
        self.conns: list[Any] = []
        self.procs: list[Any] = []

    def start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        for index in range(self.count):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_service_worker, args=(child, index, *self.args))  # not daemonic: it has children
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        for index, conn in enumerate(self.conns):  # each built and warmed its engines
            kind, payload = conn.recv()
            if kind != "ready":
                raise RuntimeError(f"service process {index} failed to start: {payload}")

    def run_level(
        self, n: int, listen: bool, duration_s: float, think_time_s: float, realistic: bool
    ) -> list[dict[str, Any]]:
        shares = even_shares(n, self.count)
        start_at = time.time() + 2.0  # every service started and idle before any client runs
        for conn, share in zip(self.conns, shares, strict=True):
            conn.send(("level", share, listen, duration_s, think_time_s, realistic, start_at))
        parts = []
        for index, conn in enumerate(self.conns):
            kind, payload = conn.recv()
            if kind != "level":
                raise RuntimeError(f"service process {index} failed a level: {payload}")
            parts.append(payload)
        return [part for part in parts if part["clients"] > 0]

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):  # a process that died has no pipe left
                conn.send(("stop",))
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def _service_worker(
    conn: Any, index: int, model: str, device: str, backend: str, config: ServiceConfig, seed: int
) -> None:
    """A service process of `_ServiceWorkers`: builds and warms its engines, then serves levels on request."""
    try:
        synth = Synthesizer(model, device=device, backend=backend)
        warm_up(synth)
        texts = make_texts(512, seed)
        rng = np.random.default_rng([seed, index + 1])
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        _, n, listen, duration_s, think_time_s, realistic, start_at = message
        try:
            part = (
                asyncio.run(
                    _serve_level(
                        synth, config, None, texts, n, duration_s, think_time_s, realistic, rng, listen, start_at
                    )
                )
                if n > 0
                else {"clients": 0}
            )
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            return
        conn.send(("level", part))


def run_load_bench(
    model: str | None = None,
    *,
    synthesizer: Synthesizer | None = None,
    device: str = "cpu",
    backend: str = "eager",
    levels: Sequence[int] = (1, 2, 4, 8, 12, 16, 24, 32),
    level_duration_s: float = 15.0,
    think_time_s: float = 0.5,
    ttfa_p99_target_s: float = 0.150,
    baseline_requests: int = 20,
    realistic_durations: bool = True,
    config: ServiceConfig | None = None,
    seed: int = 0,
    stop_after_failures: int = 2,
    saturation_clients: int = 0,
    service_processes: int = 1,
    progress: Callable[[str], None] | None = None,
) -> LoadBenchResult:
    """Measure TTFA and real-time capacity at each concurrency level, and the one-at-a-time baseline.

    Levels run in increasing order and stop after `stop_after_failures` consecutive failing levels.
    `realistic_durations` gives every request a target duration from typical speaking rates (see module doc).
    `saturation_clients` > 0 adds a closed-loop phase of that many clients that do not listen (each sends its next
    request when a stream ends): throughput under load, against the one-at-a-time baseline.
    `service_processes` > 1 serves the levels from that many service processes on the same device (as `rtvox serve
    --workers`), each with its own engines, event loop and GIL and an even share of the clients, started together;
    the baseline is still one request at a time in this process.
    """
    if service_processes < 1:
        raise ValueError(f"service_processes must be at least 1, got {service_processes}")
    if service_processes > 1 and config is not None and config.engine_process is not None:
        raise ValueError("service processes and an engine process do not combine: each worker has its own engines")
    synth = synthesizer if synthesizer is not None else Synthesizer(model, device=device, backend=backend)
    config = config or ServiceConfig(fallback_device=None, default_deadline_s=None, max_queue=1024)
    texts = make_texts(512, seed)
    say = progress or (lambda _msg: None)
    warm_up(synth)  # lazy frontend dictionaries and allocator growth are not part of any measurement
    # On a worker thread, as the service's engines run (on CPU, torch in the main thread measured up to several
    # times slower under contention), after an untimed pass so first-seen shapes cost nothing.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(run_baseline, synth, texts[:baseline_requests], realistic_durations).result()
        baseline = pool.submit(run_baseline, synth, texts[:baseline_requests], realistic_durations).result()
    say(f"baseline: {baseline}")
    engine_process = None
    if config.engine_process is not None:
        # The baseline above ran in this process, as always; the levels use one engine process for all of them
        # (a service per level would rebuild it each time), with a CPU synthesizer here preparing requests.
        host = Synthesizer(synth.model_dir, device="cpu", backend="eager")
        engine_process = EngineProcess.from_spec(config.engine_process, host)
        del synth
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        synth = host
        engine_process.start()

    workers = _ServiceWorkers(service_processes, synth, config, seed) if service_processes > 1 else None
    ran_on = {
        "device": str(synth.device if engine_process is None else engine_process.device),
        "backend": synth.backend if engine_process is None else engine_process.info.get("backend"),
        "model": str(synth.model_dir),
    }
    preempted = preempts(config, synth)  # (for the settings; `synth` may be dropped just below)
    first_floor = first_chunk_floor(config, synth, engine_process)
    if workers is not None and synthesizer is None and synth.device.type == "cuda":
        del synth  # the workers' engines need the device's memory more than this process's baseline engines do
        gc.collect()
        torch.cuda.empty_cache()

    async def run_one(n: int, rng: np.random.Generator, listen: bool) -> LevelResult:
        if workers is not None:
            parts = workers.run_level(n, listen, level_duration_s, think_time_s, realistic_durations)
        else:
            parts = [
                await _serve_level(
                    synth,
                    config,
                    engine_process,
                    texts,
                    n,
                    level_duration_s,
                    think_time_s,
                    realistic_durations,
                    rng,
                    listen,
                )
            ]
        level = _merge_level(n, parts, ttfa_p99_target_s)
        say(f"{'N' if listen else 'saturation N'}={n}: {asdict(level)}")
        return level

    async def levels_main() -> tuple[list[LevelResult], LevelResult | None]:
        results: list[LevelResult] = []
        rng = np.random.default_rng(seed)
        failures = 0
        for n in levels:
            level = await run_one(n, rng, listen=True)
            results.append(level)
            failures = 0 if level.passed else failures + 1
            if failures >= stop_after_failures:
                break
        saturation = await run_one(saturation_clients, rng, listen=False) if saturation_clients > 0 else None
        return results, saturation

    try:
        if workers is not None:
            workers.start()
        results, saturation = asyncio.run(levels_main())
    finally:
        if engine_process is not None:
            engine_process.close()
        if workers is not None:
            workers.close()
    return bench_result(
        machine={
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15": list(os.getloadavg()),  # other work on the machine during the run
            **ran_on,
        },
        settings={
            **plan_settings(
                levels,
                level_duration_s,
                think_time_s,
                ttfa_p99_target_s,
                baseline_requests,
                realistic_durations,
                saturation_clients,
                seed,
            ),
            "max_batch": config.max_batch,
            "max_wait_ms": config.max_wait_ms,
            "first_chunk_wait_ms": config.first_chunk_wait_ms,
            "max_batch_phonemes": config.max_batch_phonemes,
            "max_chunk_phonemes": later_chunk_cap(config, preempted),
            "first_chunk_phonemes": config.first_chunk_phonemes,
            "min_first_chunk_phonemes": first_floor,
            "max_queue": config.max_queue,
            "frontend_processes": config.frontend_processes,
            "batches_in_flight": config.batches_in_flight,
            "gil_switch_interval_ms": config.gil_switch_interval_ms,
            "engine_process": config.engine_process,
            "preempt_steps": config.preempt_steps,
            "preempted": preempted,  # whether the steps did (where they have preemption points)
            "bucket_edges": None if config.bucket_edges is None else list(config.bucket_edges),
            "service_processes": service_processes,
        },
        baseline=baseline,
        levels=results,
        saturation=saturation,
    )
