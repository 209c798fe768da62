"""Decode-step benchmark of the autoregressive family (issue 7): eager vs compiled (CUDA graphs) decode at
several batch sizes, tokens/s per stream and in aggregate, and achieved weight bytes/s against the HBM floor.

    python3 benchmarks/ar_decode.py --preset base --dtype bfloat16 --batches 1,16,64,256 > ar_decode.json

Method: random weights of the preset (speed does not depend on them); B sequences are prefilled with a
40-phoneme prompt, then `--steps` decode steps are timed (after `--warmup` untimed ones, which also capture the
graphs) with the context growing as in real decoding. The floor of one step is reading every weight once:
weight bytes / HBM bandwidth (4.8 TB/s for an H200's HBM3e; the issue's 4.3 TB/s is also reported). The KV cache
read grows with the context and is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch

from rtvox.models.ar import ARConfig, ARDecoder, PagedKVCache
from rtvox.runtime.ar import StaticDecodeStep

HBM_BYTES_PER_S = {"h200": 4.8e12, "issue": 4.3e12}
TOKENS_PER_SECOND_OF_AUDIO = 25.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_batch(
    model: ARDecoder, batch: int, steps: int, warmup: int, block_size: int, compile_mode: str | None, prompt: int
) -> dict[str, Any]:
    config = model.config
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    per_seq = -(-(prompt + 3 + warmup + steps + 1) // block_size)
    cache = PagedKVCache(config, batch * per_seq + 1, block_size, device, dtype)
    step = StaticDecodeStep(model, cache, compile_mode)
    tables = [list(range(b * per_seq, (b + 1) * per_seq)) for b in range(batch)]
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for b in range(batch):  # prefill each sequence
            phonemes = torch.randint(1, config.text_vocab, (1, prompt), generator=gen).to(device)
            cond = torch.randn(1, config.cond_dim, generator=gen).to(device, dtype)
            x = model.prompt_embeddings(cond, torch.zeros(1, dtype=torch.long, device=device), phonemes)
            pos = torch.arange(x.shape[1], device=device)[None]
            model.forward_paged(x, pos, cache, torch.tensor([tables[b]], device=device))
        position = prompt + 3
        last = [0] * batch
        times = []
        for i in range(warmup + steps):
            _sync(device)
            t0 = time.perf_counter()
            logits = step(last, [position] * batch, tables)
            last = logits.argmax(-1).tolist()  # the host sync a real step has too
            _sync(device)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
            position += 1
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    median = statistics.median(times)
    kv_bytes = 2 * config.layers * position * config.dim * torch.finfo(dtype).bits // 8 * batch
    return {
        "batch": batch,
        "step_ms_p50": round(median * 1e3, 3),
        "step_ms_p99": round(sorted(times)[max(0, int(0.99 * len(times)) - 1)] * 1e3, 3),
        "tokens_per_s_per_stream": round(1 / median, 1),
        "tokens_per_s_total": round(batch / median, 1),
        "realtime_streams": batch if 1 / median >= TOKENS_PER_SECOND_OF_AUDIO else 0,
        "weight_bytes": weight_bytes,
        "kv_bytes_at_end": kv_bytes,
        "weight_floor_ms": {k: round(weight_bytes / v * 1e3, 4) for k, v in HBM_BYTES_PER_S.items()},
        "x_over_weight_floor_h200": round(median / (weight_bytes / HBM_BYTES_PER_S["h200"]), 2),
        "achieved_weight_gb_per_s": round(weight_bytes / median / 1e9, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="base")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=40)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--variants", default="eager,compiled", help="eager and/or compiled (reduce-overhead)")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    model = ARDecoder(ARConfig.preset(args.preset)).to(device, dtype).eval()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu x{torch.get_num_threads()}",
        "torch": torch.__version__,
        "preset": args.preset,
        "config": model.config.to_dict(),
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "dtype": args.dtype,
        "results": {},
    }
    for variant in args.variants.split(","):
        mode = "reduce-overhead" if variant == "compiled" and device.type == "cuda" else None
        if variant == "compiled" and device.type != "cuda":
            mode = "default"
        rows = []
        for batch in [int(b) for b in args.batches.split(",")]:
            row = bench_batch(model, batch, args.steps, args.warmup, args.block_size, mode, args.prompt)
            print(variant, json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
        report["results"][variant] = rows
    if {"eager", "compiled"} <= set(report["results"]):
        report["speedup_compiled_vs_eager"] = {
            str(e["batch"]): round(e["step_ms_p50"] / c["step_ms_p50"], 2)
            for e, c in zip(report["results"]["eager"], report["results"]["compiled"], strict=True)
        }
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
