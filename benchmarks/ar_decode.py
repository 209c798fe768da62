"""Decode-step benchmark of the autoregressive family (issue 7): eager vs compiled (CUDA graphs) decode at
several batch sizes, tokens/s per stream and in aggregate, and achieved weight bytes/s against the HBM floor.

    python3 benchmarks/ar_decode.py --preset medium --dtype bfloat16 --batches 1,16,64,256 > ar_decode.json

Variants: `eager` (the forward as written), `graph` (that forward captured as one CUDA graph per (batch, table
width) bucket), `inductor-graph` (Inductor-compiled kernels captured the same way), `compiled` (torch.compile
"reduce-overhead", its own CUDA graphs), `fused-graph` (rtvox.engines.ar_fused's five launches per layer, batch
≤ 16, captured per bucket). Each variant's first-step logits are compared with the first variant's; graph
variants also replay the step twice and compare the logits (the step must be deterministic).

Method: random weights of the preset (speed does not depend on them); B sequences are prefilled with a
40-phoneme prompt, then `--steps` decode steps are timed (after `--warmup` untimed ones, which also capture the
graphs) with the context growing as in real decoding; the step's wall time includes the host's input copies,
the graph launch and the argmax's host sync. For graph variants the step's device time is also measured (CUDA
events around back-to-back replays). The floor of one step is reading every weight it uses once (the blocks,
the final norm, the head, one embedding row; not the prompt-only embeddings): those bytes / HBM bandwidth
(4.8 TB/s for an H200's HBM3e; the issue's 4.3 TB/s is also reported). The KV cache read grows with the context
and is reported beside it.
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
from rtvox.models.sampling import SamplingParams
from rtvox.runtime.ar import ARDecodeEngine, ARRequest, StaticDecodeStep

HBM_BYTES_PER_S = {"h200": 4.8e12, "issue": 4.3e12}
TOKENS_PER_SECOND_OF_AUDIO = 25.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


VARIANTS = {  # name -> (torch.compile mode, hand-captured CUDA graph, decode kernels)
    "eager": (None, False, "torch"),
    "graph": (None, True, "torch"),  # the eager forward captured per bucket
    "inductor-graph": ("default", True, "torch"),  # Inductor's fused kernels captured per bucket
    "compiled": ("reduce-overhead", False, "torch"),  # torch.compile's own CUDA graphs (cudagraph trees)
    "fused-graph": (None, True, "triton"),  # rtvox.engines.ar_fused (batch <= 16) captured per bucket
    "fused-graph-nopdl": (None, True, "triton"),  # the same without programmatic dependent launch
}
REPLAYS = 200  # back-to-back graph replays timed with CUDA events: the step's device time


def bench_batch(
    model: ARDecoder, batch: int, steps: int, warmup: int, block_size: int, variant: str, prompt: int
) -> tuple[dict[str, Any], torch.Tensor]:
    config = model.config
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    compile_mode, graph, kernels = VARIANTS[variant]
    if device.type != "cuda":
        compile_mode, graph = ("default" if compile_mode else None), False
    per_seq = -(-(prompt + 3 + warmup + steps + 1) // block_size)
    cache = PagedKVCache(config, batch * per_seq + 1, block_size, device, dtype)
    step = StaticDecodeStep(model, cache, compile_mode, graph, kernels)
    if variant.endswith("-nopdl"):
        step._fused.pdl = False
    tables = [list(range(b * per_seq, (b + 1) * per_seq)) for b in range(batch)]
    gen = torch.Generator().manual_seed(0)
    prompts: list[list[int]] = []
    with torch.no_grad():
        for b in range(batch):  # prefill each sequence
            phonemes = torch.randint(1, config.text_vocab, (1, prompt), generator=gen).to(device)
            prompts.append(phonemes[0].tolist())
            cond = torch.randn(1, config.cond_dim, generator=gen).to(device, dtype)
            x = model.prompt_embeddings(cond, torch.zeros(1, dtype=torch.long, device=device), phonemes)
            pos = torch.arange(x.shape[1], device=device)[None]
            model.forward_paged(x, pos, cache, torch.tensor([tables[b]], device=device))
        position = prompt + 3
        last = [0] * batch
        pointer = [0] * batch  # phoneme-pointer models: each row's pointer, moved on the host by its token
        times = []
        first = None
        for i in range(warmup + steps):
            _sync(device)
            t0 = time.perf_counter()
            pointers = [model.pointer_triple(prompts[b], pointer[b]) for b in range(batch)] if config.advances else None
            logits = step(last, [position] * batch, tables, pointers)
            if first is None:
                first = logits.float().cpu()
            last = logits.argmax(-1).tolist()  # the host sync a real step has too
            if config.advances:
                pointer = [min(p + model.advance(t), prompt - 1) for p, t in zip(pointer, last, strict=True)]
            _sync(device)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
            position += 1
        device_ms = replay_ms(step) if graph else None
        replays_identical = replays_equal(step) if graph else None
        kernels_us = kernel_profile(step) if graph and PROFILE else None
    all_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    weight_bytes = step_weight_bytes(model)
    median = statistics.median(times)
    kv_bytes = 2 * config.layers * position * config.dim * torch.finfo(dtype).bits // 8 * batch
    assert first is not None
    row = {
        "batch": batch,
        "step_ms_p50": round(median * 1e3, 3),
        "step_ms_p99": round(sorted(times)[max(0, int(0.99 * len(times)) - 1)] * 1e3, 3),
        "tokens_per_s_per_stream": round(1 / median, 1),
        "tokens_per_s_total": round(batch / median, 1),
        "realtime_streams": batch if 1 / median >= TOKENS_PER_SECOND_OF_AUDIO else 0,
        "weight_bytes": weight_bytes,
        "all_parameter_bytes": all_bytes,
        "kv_bytes_at_end": kv_bytes,
        "weight_floor_ms": {k: round(weight_bytes / v * 1e3, 4) for k, v in HBM_BYTES_PER_S.items()},
        "x_over_weight_floor": {k: round(median / (weight_bytes / v), 2) for k, v in HBM_BYTES_PER_S.items()},
        "achieved_weight_gb_per_s": round(weight_bytes / median / 1e9, 1),
    }
    if replays_identical is not None:
        row["replays_identical"] = replays_identical
    if device_ms is not None:  # the same step's GPU time alone: no host launch, input copies or sync
        row["device_step_ms"] = round(device_ms, 4)
        row["device_x_over_weight_floor"] = {
            k: round(device_ms / 1e3 / (weight_bytes / v), 2) for k, v in HBM_BYTES_PER_S.items()
        }
        row["device_weight_gb_per_s"] = round(weight_bytes / (device_ms / 1e3) / 1e9, 1)
    if kernels_us is not None:
        row["kernels_us_per_step"] = kernels_us
    return row, first


PROFILE = False  # --profile: per-kernel device time of graph variants


def kernel_profile(step: StaticDecodeStep, replays: int = 20) -> dict[str, Any]:
    """Device µs per step by kernel name (torch.profiler over graph replays; CUPTI sees the kernels inside)."""
    from torch.profiler import ProfilerActivity, profile

    graph = list(step._graphs.values())[-1][0]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals.setdefault(event.name[:80], [0.0, 0])
            entry[0] += event.time_range.elapsed_us()
            entry[1] += 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
    return {
        "total_us": round(sum(v[0] for _, v in rows) / replays, 2),
        "launches": round(sum(v[1] for _, v in rows) / replays, 1),
        "by_kernel": {k: [round(v[0] / replays, 2), round(v[1] / replays, 1)] for k, v in rows[:12]},
    }


def step_weight_bytes(model: ARDecoder) -> int:
    """Weight bytes one decode step must read: every block, the final norm and the head, plus one row each of
    the code and position embeddings, and a phoneme-pointer model's three pointer rows (the count, text and cond
    embeddings are prompt-only)."""
    read = [*model.blocks.parameters(), *model.norm.parameters(), *model.head.parameters()]
    rows = (2 + (3 if model.config.advances else 0)) * model.config.dim
    elem = model.head.weight.element_size()
    return sum(p.numel() * p.element_size() for p in read) + rows * elem


def replay_ms(step: StaticDecodeStep) -> float:
    """Device time of one decode step: the last-used bucket's graph replayed REPLAYS times back to back between
    two CUDA events (the host enqueues faster than the GPU runs them, so the span is the kernels' own time).
    Replays rewrite the same cache slot with the same key, so the cache is unchanged."""
    graph = list(step._graphs.values())[-1][0]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    for _ in range(REPLAYS):
        graph.replay()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / REPLAYS


def replays_equal(step: StaticDecodeStep) -> bool:
    """Two replays of the last-used bucket's graph give bit-identical logits (no order-dependent reductions)."""
    graph, *_, out = list(step._graphs.values())[-1]
    graph.replay()
    first = out.clone()
    graph.replay()
    return bool(torch.equal(first, out))


def bench_engine(model: ARDecoder, streams: int, tokens: int, variant: str, prompt: int) -> dict[str, Any]:
    """The whole continuous-batching engine (scheduler, prefill, graphed decode, on-device sampling with top-k/p,
    temperature and repetition penalty): `streams` requests arrive together, each asks for `tokens` codes
    (duration control); time to first token and each stream's token rate against the audio's."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    compile_mode, graph, kernels = VARIANTS[variant]
    if device.type != "cuda":
        compile_mode, graph = ("default" if compile_mode else None), False
    config = model.config
    per_seq = -(-(prompt + 3 + tokens + 1) // 16)
    engine = ARDecodeEngine(
        model,
        streams * per_seq,
        16,
        max_batch=streams,
        dtype=dtype,
        static=True,
        compile_mode=compile_mode,
        cuda_graph=graph,
        kernels=kernels,
    )
    gen = torch.Generator().manual_seed(1)

    def requests(tag: str) -> list[ARRequest]:
        return [
            ARRequest(
                f"{tag}{i}",
                torch.randint(1, config.text_vocab, (prompt,), generator=gen).tolist(),
                torch.randn(config.cond_dim, generator=gen).tolist(),
                token_count=tokens,
                sampling=SamplingParams(temperature=0.8, top_k=50, top_p=0.9, repetition_penalty=1.1, seed=i),
            )
            for i in range(streams)
        ]

    engine.generate(requests("warm"))  # captures every bucket the timed run meets
    _sync(device)
    t0 = time.perf_counter()
    first: dict[str, float] = {}
    done: dict[str, float] = {}
    step_times = []
    for r in requests("r"):
        engine.add(r)
    while not engine.idle():
        s0 = time.perf_counter()
        for event in engine.step():  # the step's tokens are on the host: no extra sync needed
            now = time.perf_counter() - t0
            first.setdefault(event.request_id, now)
            if event.finished:
                done[event.request_id] = now
        step_times.append(time.perf_counter() - s0)
    wall = max(done.values())
    decode = statistics.median(step_times[2:]) if len(step_times) > 3 else statistics.median(step_times)
    rate = 1 / decode  # tokens per second per stream in steady decoding
    return {
        "streams": streams,
        "tokens_each": tokens,
        "ttft_ms_p50": round(statistics.median(first.values()) * 1e3, 2),
        "ttft_ms_max": round(max(first.values()) * 1e3, 2),
        "decode_step_ms_p50": round(decode * 1e3, 3),
        "tokens_per_s_per_stream": round(rate, 1),
        "tokens_per_s_total": round(streams * tokens / wall, 1),
        "x_realtime_per_stream": round(rate / TOKENS_PER_SECOND_OF_AUDIO, 2),
        "all_streams_realtime": rate >= TOKENS_PER_SECOND_OF_AUDIO and len(done) == streams,
        "wall_s": round(wall, 3),
    }


def sweep_tiles(model: ARDecoder, args: argparse.Namespace) -> dict[str, Any]:
    """fused-graph at batch 1 with each GEMV tile (rtvox.engines.ar_fused.GEMV_TILE), the default restored after."""
    from rtvox.engines import ar_fused

    default = ar_fused.GEMV_TILE
    out: dict[str, Any] = {}
    try:
        for spec in args.fused_tiles.split(","):
            block_n, block_k, warps = (int(v) for v in spec.split("x"))
            ar_fused.GEMV_TILE = (block_n, block_k, warps)
            try:
                row, _ = bench_batch(model, 1, args.steps, args.warmup, args.block_size, "fused-graph", args.prompt)
            except Exception as exc:
                out[spec] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            out[spec] = {k: row.get(k) for k in ("step_ms_p50", "device_step_ms", "device_x_over_weight_floor")}
            print("tile", spec, json.dumps(out[spec]), file=sys.stderr, flush=True)
    finally:
        ar_fused.GEMV_TILE = default
    return out


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
    parser.add_argument(
        "--advances",
        type=int,
        default=0,
        help="phoneme-pointer tokens (code x A + advance, as the trained family): A; 0 = plain codes",
    )
    parser.add_argument("--n-codes", type=int, default=None, help="token vocabulary (with --advances: codes x A)")
    parser.add_argument("--variants", default="eager,graph,inductor-graph", help=f"some of {sorted(VARIANTS)}")
    parser.add_argument(
        "--fused-tiles",
        default="",
        help="batch-1 GEMV tiles of fused-graph to time, block_n x block_k x warps: e.g. 16x256x4,8x512x4",
    )
    parser.add_argument("--engine-streams", default="", help="e.g. 1,256: also time the whole engine")
    parser.add_argument("--engine-tokens", type=int, default=150, help="codes per request (6 s at 25/s)")
    parser.add_argument("--engine-variants", default="eager,inductor-graph")
    parser.add_argument("--profile", action="store_true", help="per-kernel device time of graph variants")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    for name in ("recompile_limit", "cache_size_limit"):  # one compiled graph per (batch, table width) bucket
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    torch.manual_seed(0)
    overrides: dict[str, int] = {"advances": args.advances}
    if args.n_codes is not None:
        overrides["n_codes"] = args.n_codes
    model = ARDecoder(ARConfig.preset(args.preset, **overrides)).to(device, dtype).eval()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu x{torch.get_num_threads()}",
        "torch": torch.__version__,
        "command": "python3 " + " ".join(sys.argv),
        "preset": args.preset,
        "config": model.config.to_dict(),
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "dtype": args.dtype,
        "prompt": args.prompt,
        "results": {},
        "errors": {},
    }
    reference: dict[int, torch.Tensor] = {}
    for variant in args.variants.split(","):
        rows = []
        for batch in [int(b) for b in args.batches.split(",")]:
            t0 = time.perf_counter()
            try:
                row, first = bench_batch(model, batch, args.steps, args.warmup, args.block_size, variant, args.prompt)
            except Exception as exc:  # report and go on: one variant failing must not lose the others' figures
                report["errors"][f"{variant}@{batch}"] = f"{type(exc).__name__}: {exc}"[:2000]
                print(variant, batch, "failed:", exc, file=sys.stderr, flush=True)
                continue
            reference.setdefault(batch, first)  # the first variant (eager) is the reference
            row["max_abs_logit_diff_vs_first_variant"] = round(float((first - reference[batch]).abs().max()), 4)
            row["setup_s"] = round(time.perf_counter() - t0, 1)
            print(variant, json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
        report["results"][variant] = rows
    if args.fused_tiles:
        report["fused_tiles"] = sweep_tiles(model, args)
    report["engine"] = {}
    for variant in [v for v in args.engine_variants.split(",") if args.engine_streams]:
        for streams in [int(n) for n in args.engine_streams.split(",")]:
            try:
                row = bench_engine(model, streams, args.engine_tokens, variant, args.prompt)
            except Exception as exc:
                report["errors"][f"engine-{variant}@{streams}"] = f"{type(exc).__name__}: {exc}"[:2000]
                print("engine", variant, streams, "failed:", exc, file=sys.stderr, flush=True)
                continue
            print("engine", variant, json.dumps(row), file=sys.stderr, flush=True)
            report["engine"].setdefault(variant, []).append(row)
    eager = {r["batch"]: r["step_ms_p50"] for r in report["results"].get("eager", [])}
    report["speedup_vs_eager"] = {
        v: {str(r["batch"]): round(eager[r["batch"]] / r["step_ms_p50"], 2) for r in rows if r["batch"] in eager}
        for v, rows in report["results"].items()
        if v != "eager"
    }
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
