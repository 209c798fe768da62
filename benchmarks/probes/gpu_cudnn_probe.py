"""Does cuDNN's autotuner (torch.backends.cudnn.benchmark) speed up the graphs backend's big steps? A batch of 32
rows like the load bench's later chunks (random phonemes, 64–160 per row, 500–1 470 frames pinned) through the
PipelineEngine (serve profile, eager kernels, captured), benchmark off then on; then a torch.profiler table of the
uncaptured decode + vocoder program with benchmark on. Prints JSON lines and the table.

    python3 benchmarks/probes/gpu_cudnn_probe.py --model models/rtvox-small
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from rtvox.engines.pipeline import PipelineEngine
from rtvox.engines.quality import random_inputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--rows", type=int, default=32)
    args = parser.parse_args()
    bundle = ModelBundle.load(args.model)
    cfg = bundle.config.acoustic
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(64, 161, (args.rows,), generator=g).tolist()
    targets = [int(n * 9.2) for n in lengths]
    inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=1)
    audio_s = sum(targets) * 256 / 24000
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        engine = PipelineEngine(bundle, "cuda", ShapeProfile.preset("serve"), compile_mode=None)
        t0 = time.perf_counter()
        engine(inputs)
        torch.cuda.synchronize()
        build = time.perf_counter() - t0
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            engine(inputs)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1000)
        p50 = statistics.median(times)
        print(
            json.dumps(
                {
                    "cudnn_benchmark": bench,
                    "capture_s": build,
                    "p50_ms": p50,
                    "audio_s": audio_s,
                    "audio_s_per_s": audio_s / p50 * 1000,
                    "max_frames": max(targets),
                }
            ),
            flush=True,
        )
        del engine
        torch.cuda.empty_cache()
    engine = PipelineEngine(bundle, "cuda", ShapeProfile.preset("serve"), compile_mode=None)
    tensors = [t.to("cuda") for t in inputs.tensors("cpu")]
    tilt = torch.zeros(args.rows, device="cuda")
    with torch.inference_mode():
        hidden, durations = engine._encode_fn(*tensors)
        for _ in range(3):
            engine._decode_fn(hidden, durations, tilt, 1536)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                engine._encode_fn(*tensors)
                engine._decode_fn(hidden, durations, tilt, 1536)
            torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))


if __name__ == "__main__":
    main()
