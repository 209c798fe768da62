"""How much serving the host side (event loop, scheduler, executor hand-offs, load clients) sustains when the
engine is not the limit: the TTSService on a Synthesizer whose chunk step does the real step's input work and
sleeps for an emulated device time (`--step-ms` + `--row-ms` per row, in `--syncs` waits; sleeping releases the
GIL as a CUDA sync does) and returns silent chunks of the length the model would make, the frontend's results
precomputed. A closed-loop saturation phase under cProfile (the event-loop thread) → audio-s/s, the engine
thread's busy share, and the loop's top functions. `--switch-interval-ms` sets sys.setswitchinterval;
`--engine-process` runs the emulated step in an engine process (ServiceConfig.engine_process) instead.

    .venv/bin/python benchmarks/probes/service_host_probe.py --clients 1024 --seconds 10 --max-batch 64
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rtvox.constants import HOP_LENGTH
from rtvox.runtime import engine_process
from rtvox.runtime.loadbench import _run_level, make_texts
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.steps import ChunkJob, audio_chunk, encode_inputs, encode_row
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import AudioChunk

FRAMES_PER_ID = 7  # about rtvox-small's mean frames per phoneme id
STEP_ENV = "RTVOX_PROBE_STEP"  # "step_ms,row_ms,syncs", read by fake_step (in this process or the engine process)


def fake_step(jobs: Sequence[ChunkJob]) -> list[AudioChunk]:
    """The real step's host work (inputs of the batch) between waits that release the GIL, as syncs do; silent
    chunks of the length the model would make."""
    step_ms, row_ms, syncs = (float(x) for x in os.environ[STEP_ENV].split(","))
    wait = (step_ms + row_ms * len(jobs)) / 1000.0 / syncs
    for _ in range(int(syncs)):
        encode_inputs([encode_row(job) for job in jobs], torch.device("cpu"))
        time.sleep(wait)
    out = []
    for job in jobs:
        n_ids = len(job.prepared.chunks[job.index].ids)
        wav = np.full(n_ids * FRAMES_PER_ID * HOP_LENGTH, 1e-4, np.float32)  # written, as a device copy writes
        out.append(audio_chunk(job, wav, [FRAMES_PER_ID] * n_ids))
    return out


def emulated_child(*args: Any) -> None:
    """The engine process's entry point with fake_step in place of the Synthesizer's step."""
    Synthesizer.run_step = lambda self, jobs: fake_step(jobs)  # type: ignore[method-assign]
    engine_process._serve(*args)


class EmulatedEngineProcess(engine_process.EngineProcess):
    child_main = staticmethod(emulated_child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="models/rtvox-base")
    parser.add_argument("--clients", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--batches-in-flight", type=int, default=1)
    parser.add_argument("--step-ms", type=float, default=4.0, help="emulated device time of a step")
    parser.add_argument("--row-ms", type=float, default=0.35, help="... plus this per row")
    parser.add_argument("--syncs", type=int, default=2, help="the emulated device time split into this many waits")
    parser.add_argument("--switch-interval-ms", type=float, default=None, help="sys.setswitchinterval (default 5)")
    parser.add_argument("--top", type=int, default=25, help="event-loop functions to list (0: no profiler)")
    parser.add_argument("--engine-process", action="store_true", help="the emulated engines in their own process")
    args = parser.parse_args()

    synth = Synthesizer(args.model, device="cpu", backend="eager")
    texts = make_texts(512, 0)
    fronts = {t.text: synth.frontend.process(t.text) for t in texts}

    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000.0)

    os.environ[STEP_ENV] = f"{args.step_ms},{args.row_ms},{args.syncs}"
    child = None
    if args.engine_process:
        child = EmulatedEngineProcess(synth.model_dir, "cpu", "eager", synth)
        child.start()
    else:
        synth.run_step = fake_step  # type: ignore[method-assign]
    config = ServiceConfig(
        max_batch=args.max_batch,
        first_chunk_wait_ms=0,
        max_queue=4096,
        default_deadline_s=None,
        fallback_device=None,
        batches_in_flight=args.batches_in_flight,
    )

    async def run() -> dict[str, float]:
        service = TTSService(synth, config, engine_process=child)
        await service.start()
        assert service._executor is not None
        service._executor._read_text = fronts.__getitem__  # type: ignore[assignment]
        rng = np.random.default_rng(0)
        records, errors, wall = await _run_level(service, texts, args.clients, args.seconds, 0.5, False, rng, False)
        primary = service.health()["engines"]["primary"]
        await service.stop()
        return {
            "streams": len(records),
            "errors": errors,
            "audio_s_per_s": sum(r.audio_s for r in records) / wall,
            "engine_busy": primary["busy_s"] / wall,
            "steps_per_s": primary["steps"] / wall,
            "step_ms_mean": primary["step_s"] / max(1, primary["steps"]) * 1000.0,
            "ttfa_p50_ms": float(np.median([r.ttfa_s for r in records]) * 1000.0),
        }

    profiler = cProfile.Profile() if args.top > 0 else None  # --top 0: no profiler on the event loop
    try:
        result = asyncio.run(run()) if profiler is None else profiler.runcall(asyncio.run, run())
    finally:
        if child is not None:
            child.close()
    print(json.dumps({**vars(args), **result}, indent=1))
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.top)
        print(text.getvalue())


if __name__ == "__main__":
    main()
