"""Where the short bench text's time goes on the CPU: the `auto` engines (ONNX Runtime fp32 encoder, eager bf16
decoder and vocoder) timed module by module, each module alone and in the encode → decode → vocoder chain, with
and without the bench's pause between turns (`rtvox.engines.bench.TURN_PAUSE_S`) and Piper's turn beside it.

    .venv/bin/python benchmarks/probes/cpu_short_chain.py --model models/rtvox-small --text short --repeats 20

Prints one line per scenario (median ms per module and end to end) and, with --json, writes them there.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.engines.base import BuildOptions
from rtvox.engines.bench import BENCH_TEXTS, TURN_PAUSE_S, text_chunks
from rtvox.engines.build import build_engines, describe_engines
from rtvox.models.bundle import ModelBundle


def median_ms(samples: list[float]) -> float:
    return float(np.median(samples) * 1e3)


def chain(engines: dict[str, Any], inputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
    """One chunk through the three engines, as rtvox.engines.bench.run_once times it."""
    t0 = time.perf_counter()
    hidden, durations = engines["acoustic_encode"](*inputs)
    t1 = time.perf_counter()
    (mel,) = engines["acoustic_decode"](hidden, durations)
    t2 = time.perf_counter()
    (wav,) = engines["vocoder"](mel)
    _ = wav.cpu()
    t3 = time.perf_counter()
    return {"encode": t1 - t0, "decode": t2 - t1, "vocoder": t3 - t2, "e2e": t3 - t0}


def scenario(
    name: str, repeats: int, step: Callable[[], dict[str, float]], between: Callable[[], None] | None = None
) -> dict[str, float]:
    for _ in range(3):
        step()
    samples: list[dict[str, float]] = []
    for _ in range(repeats):
        if between is not None:
            between()
        samples.append(step())
    result = {k: median_ms([s[k] for s in samples]) for k in samples[0]}
    print(f"{name:<44}", "  ".join(f"{k} {v:6.2f}" for k, v in result.items()), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--text", default="short", choices=sorted(BENCH_TEXTS))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--piper", action="store_true", help="also a scenario with Piper's turn between chains")
    parser.add_argument("--profile", action="store_true", help="torch.profiler table of one chain after a pause")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    bundle = ModelBundle.load(args.model, device=torch.device("cpu"), dtype=torch.float32)
    engines = build_engines(bundle, "auto", "cpu", options=BuildOptions())
    print(json.dumps({k: [v["backend"], v["dtype"]] for k, v in describe_engines(engines).items()}))
    text, seconds = BENCH_TEXTS[args.text]
    chunks = text_chunks(bundle, text, seconds)
    print(f"{args.text}: {len(chunks)} chunk(s), frames {[int(c.target_frames.sum()) for c in chunks]}")
    inputs = chunks[0].tensors("cpu")
    hidden, durations = engines["acoustic_encode"](*inputs)
    (mel,) = engines["acoustic_decode"](hidden, durations)

    def alone(module: str, *xs: torch.Tensor) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            t0 = time.perf_counter()
            engines[module](*xs)
            return {module: time.perf_counter() - t0}

        return run

    def pause() -> None:
        time.sleep(TURN_PAUSE_S)

    results: dict[str, dict[str, float]] = {}
    results["encode alone"] = scenario("encode alone (back to back)", args.repeats, alone("acoustic_encode", *inputs))
    results["decode alone"] = scenario(
        "decode alone (back to back)", args.repeats, alone("acoustic_decode", hidden, durations)
    )
    results["vocoder alone"] = scenario("vocoder alone (back to back)", args.repeats, alone("vocoder", mel))
    results["decode alone, pause"] = scenario(
        "decode alone, 50 ms pause before", args.repeats, alone("acoustic_decode", hidden, durations), pause
    )
    results["chain"] = scenario("chain (back to back)", args.repeats, lambda: chain(engines, inputs))
    results["chain, pause"] = scenario("chain, 50 ms pause before", args.repeats, lambda: chain(engines, inputs), pause)
    if args.piper:
        from rtvox.engines.bench_run import piper_runner

        piper = piper_runner(threads=torch.get_num_threads())

        def piper_turn() -> None:
            time.sleep(TURN_PAUSE_S)
            piper(text)
            time.sleep(TURN_PAUSE_S)

        results["chain, piper"] = scenario(
            "chain, Piper's turn + pauses before", args.repeats, lambda: chain(engines, inputs), piper_turn
        )
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        pause()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            chain(engines, inputs)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
