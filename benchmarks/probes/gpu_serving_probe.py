"""The service's GPU step on the H200: backend "graphs" (captured whole-chain pipeline) against eager fp32 through
the Synthesizer's own chunk step — build (capture) time, per-chunk parity (durations, log-mel L1 of the audio)
and step latency at batch 1 and batch 32 on real prepared requests.

    python3 benchmarks/probes/gpu_serving_probe.py OUT_DIR --model models/rtvox-small
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from rtvox.engines.quality import log_mel_l1
from rtvox.runtime.loadbench import make_texts
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest

REQUESTS = [
    SynthesisRequest(text="Thanks for calling, how can I help you today? Your order has shipped."),
    SynthesisRequest(text="您好，请问有什么可以帮您？您的订单已经发货，预计周四送达。"),
    SynthesisRequest(text="我们下周去New York出差，3点到。", voice=None, speed=1.3),
    SynthesisRequest(text="That is a great question, and the short answer is yes!", emotion="happy"),
    SynthesisRequest(text="会议改到下午三点半，请准时参加。", emotion="sad", pitch_scale=1.2),
    SynthesisRequest(text="Please hold on while I look that up for you.", duration=4.0),
]


def timed(fn, repeats: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"p50_ms": statistics.median(times), "p99_ms": times[int(0.99 * (len(times) - 1))], "n": len(times)}


def step_timings(synth: Synthesizer, first: list[ChunkJob], later: list[ChunkJob], repeats: int) -> dict[str, object]:
    return {
        "batch1_first_chunk": timed(lambda: synth.run_step(first[:1]), repeats),
        "batch8_first_chunks": timed(lambda: synth.run_step(first[:8]), repeats // 2),
        "batch32_first_chunks": timed(lambda: synth.run_step(first[:32]), repeats // 2),
        "batch32_later_chunks": timed(lambda: synth.run_step(later[:32]), repeats // 2),
        "batch64_later_chunks": timed(lambda: synth.run_step(later[:64]), repeats // 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument(
        "--kernels",
        default="none,dynamic",
        help="RTVOX_PIPELINE_COMPILE values to compare; 'fused': eager kernels with the fused Triton frame kernels",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}

    def save() -> None:
        (args.out / "gpu_serving_probe.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))

    eager = Synthesizer(args.model, device="cuda", backend="eager")
    prepared = [eager.prepare(r) for r in REQUESTS]
    jobs = [ChunkJob(p, i) for p in prepared for i in range(len(p.chunks))]
    want = eager.run_step(jobs)
    texts = make_texts(256, 0)
    many = [eager.prepare(SynthesisRequest(text=t.text)) for t in texts]
    first = [ChunkJob(p, 0) for p in many]
    later = [ChunkJob(p, i) for p in many for i in range(1, len(p.chunks))]
    result["later_chunks"] = len(later)
    result["eager"] = step_timings(eager, first, later, args.repeats)
    result["prepare_one"] = timed(lambda: eager.prepare(SynthesisRequest(text=texts[0].text)), args.repeats)
    print("eager", result["eager"], flush=True)
    save()
    for kernels in args.kernels.split(","):
        os.environ["RTVOX_PIPELINE_COMPILE"] = "none" if kernels == "fused" else kernels
        os.environ["RTVOX_PIPELINE_FUSED"] = "1" if kernels == "fused" else "0"
        entry: dict[str, object] = {}
        result[f"graphs-{kernels}"] = entry
        t0 = time.perf_counter()
        try:
            graphs = Synthesizer(args.model, device="cuda", backend="graphs")
        except Exception as exc:  # a variant that does not build is reported, not fatal
            entry["error"] = repr(exc)[:2000]
            save()
            continue
        entry["build_s"] = time.perf_counter() - t0
        assert graphs.pipeline is not None
        entry["buckets"] = {
            "encode": len(graphs.pipeline._slots),
            "decode": sum(len(s.decoders) for s in graphs.pipeline._decode_slots.values()),
        }
        rows = []
        for job, g, w in zip(jobs, graphs.run_step(jobs), want, strict=True):
            same = sum(a == b for a, b in zip(g.durations, w.durations, strict=True)) / max(1, len(w.durations))
            l1 = log_mel_l1(torch.from_numpy(g.audio)[None], torch.from_numpy(w.audio)[None])
            rows.append({"text": job.prepared.chunks[job.index].text[:40], "durations_equal": same, "log_mel_l1": l1})
        entry["parity"] = rows
        entry["parity_max_l1"] = max(r["log_mel_l1"] for r in rows)
        entry["steps"] = step_timings(graphs, first, later, args.repeats)
        entry["audio_s"] = {
            "batch32_first": sum(c.seconds for c in graphs.run_step(first[:32])),
            "batch64_later": sum(c.seconds for c in graphs.run_step(later[:64])),
        }
        print(kernels, json.dumps(entry, ensure_ascii=False)[:1500], flush=True)
        save()
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
