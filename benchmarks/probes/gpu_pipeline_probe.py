"""Where the compiled GPU pipeline's time goes, and what whole-pipeline CUDA graphs save (H200 probe).

    python3 benchmarks/probes/gpu_pipeline_probe.py OUTDIR [--model models/rtvox-small] [--repeats 30]

For the 10-s utterance of benchmarks/gpu_engines.py (120 phonemes, 938 frames, batch 1, buckets 128 / 1024):
  eager-fp32              the three eager engines (the baseline of issue 4's "≥ 6× faster")
  pipeline-default        rtvox.engines.pipeline.PipelineEngine: encode (fp32) and decode + vocoder (bf16) as
                          two CUDA graphs of torch.compile "default" kernels per bucket; batch sweep 1/8/32/64
  pipeline-eager-kernels  the same two graphs around eager kernels
  pipeline-enc-fp32-weights  pipeline-default with the encoder's weights resident in fp32 (the default keeps
                          them in fp16 and upcasts where used: same arithmetic, half the bytes)
  inductor-enc32-bf16     the per-module `inductor` engines (reduce-overhead), encoder fp32, plus a
                          torch.profiler pass per module: kernels per call, GPU busy time against wall time
Every variant: latency mean / P50 / P99 over `repeats` runs after warm-up, log-mel L1 against eager fp32,
peak memory. Writes OUTDIR/gpu_pipeline_probe.json after every variant. (The first version of this probe,
2026-12-03 16:27 UTC, also timed hand-captured graphs around all-bf16 modules: results/gpu/gpu_pipeline_probe_1.json.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

_SRC = str(Path(__file__).resolve().parents[2] / "src")
sys.path.insert(0, _SRC)

import numpy as np  # noqa: E402 - after the sys.path setup above
import torch  # noqa: E402 - after the sys.path setup above

from rtvox.constants import HOP_LENGTH  # noqa: E402 - after the sys.path setup above
from rtvox.engines.base import BuildOptions, Engine  # noqa: E402 - after the sys.path setup above
from rtvox.engines.bench import latency_stats, time_pipeline  # noqa: E402 - after the sys.path setup above
from rtvox.engines.build import build_engines  # noqa: E402 - after the sys.path setup above
from rtvox.engines.cache import runtime_versions  # noqa: E402 - after the sys.path setup above
from rtvox.engines.quality import log_mel_l1, random_inputs, run_pipeline  # noqa: E402 - after the sys.path setup above
from rtvox.engines.shapes import AxisRange, ShapeProfile  # noqa: E402 - after the sys.path setup above
from rtvox.models.bundle import ModelBundle  # noqa: E402 - after the sys.path setup above

PHONEMES, FRAMES, PH_BUCKET, FR_BUCKET = 120, 938, 128, 1024
T0 = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", type=Path, default=Path("models/rtvox-small"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--budget-s", type=float, default=420.0, help="batch sweeps stop past this")
    parser.add_argument("--variants", default="", help="comma list of variant labels to run (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    report: dict[str, Any] = {
        "versions": runtime_versions(),
        "gpu": torch.cuda.get_device_name(dev),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "utterance": {"phonemes": PHONEMES, "frames": FRAMES},
        "variants": {},
    }
    path = args.out / "gpu_pipeline_probe.json"

    def save() -> None:
        path.write_text(json.dumps(report, indent=1))

    bundle = ModelBundle.load(args.model, device="cpu")
    cfg = bundle.config.acoustic
    utt = random_inputs([PHONEMES], cfg.cond_dim, cfg.vocab_size, [FRAMES], seed=1)
    gpu_inputs = utt.tensors(dev)
    bundle.acoustic.to(dev).eval()
    bundle.vocoder.to(dev).eval()
    eager = build_engines(bundle, "eager", dev)
    with torch.inference_mode():
        reference, _ = run_pipeline(eager, utt, dev)
    reference = reference[:, : FRAMES * HOP_LENGTH].cpu()

    def engines_variant(label: str, engines: dict[str, Engine], prof: bool) -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t = time_pipeline(engines, [utt], dev, args.repeats, warmup=3)
        wav, _ = run_pipeline(engines, utt, dev)
        r: dict[str, Any] = {
            "e2e": t["e2e"],
            "modules": t["modules"],
            "l1": log_mel_l1(wav[:, : FRAMES * HOP_LENGTH].cpu(), reference),
            "peak_mb": torch.cuda.max_memory_allocated() / 2**20,
        }
        if prof:
            from torch.profiler import ProfilerActivity, profile

            hidden, durations = engines["acoustic_encode"](*gpu_inputs)
            (mel,) = engines["acoustic_decode"](hidden, durations)
            calls = {
                "acoustic_encode": lambda: engines["acoustic_encode"](*gpu_inputs),
                "acoustic_decode": lambda: engines["acoustic_decode"](hidden, durations),
                "vocoder": lambda: engines["vocoder"](mel),
            }
            r["profile"] = {}
            for name, call in calls.items():
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                    for _ in range(5):
                        call()
                    torch.cuda.synchronize()
                kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                gpu_us = sum(
                    e.device_time_total for e in p.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA
                )
                top = sorted(p.key_averages(), key=lambda e: -e.device_time_total)[:12]
                r["profile"][name] = {
                    "kernels_per_call": len(kernels) / 5,
                    "gpu_busy_us_per_call": gpu_us / 5,
                    "top": [(e.key[:90], round(e.device_time_total / 5, 1), e.count // 5) for e in top],
                    "cpu_top": [
                        (e.key[:90], round(e.self_cpu_time_total / 5, 1), e.count // 5)
                        for e in sorted(p.key_averages(), key=lambda e: -e.self_cpu_time_total)[:12]
                    ],
                }
        report["variants"][label] = r
        print(label, json.dumps({k: v for k, v in r.items() if k != "profile"})[:400], flush=True)
        save()

    prof1 = ShapeProfile(
        "probe",
        AxisRange(1, 1, 1, (1,)),
        AxisRange(2, PH_BUCKET, PH_BUCKET, (PH_BUCKET,)),
        AxisRange(2, FR_BUCKET, FR_BUCKET, (FR_BUCKET,)),
        AxisRange(2, 512, 512, (512,)),
    )
    cache = Path(os.environ.get("RTVOX_ENGINE_CACHE", "/tmp/rtvox-engine-cache"))

    def inductor_mixed() -> None:
        """The per-module inductor engines with the encoder in fp32 (what `auto` builds on CUDA)."""
        options = BuildOptions(profile=prof1, cache_dir=cache, mode="reduce-overhead")
        engines = build_engines(
            bundle, "inductor", dev, torch.bfloat16, options=options, modules=("acoustic_decode", "vocoder")
        )
        engines |= build_engines(bundle, "inductor", dev, torch.float32, options=options, modules=("acoustic_encode",))
        engines_variant("inductor-enc32-bf16", engines, prof=True)

    def pipeline(label: str, mode: str | None, batches: tuple[int, ...], fp16_weights: bool = True) -> None:
        from rtvox.engines.bench import batched
        from rtvox.engines.pipeline import PipelineEngine

        # An earlier variant's engine stays alive in torch.compile's caches until they are reset: without this
        # its memory sat in `base` and was freed mid-variant (run 5's negative figures).
        torch._dynamo.reset()
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        prof = ShapeProfile(
            "probe-b", AxisRange(1, 1, max(batches), batches), prof1.phonemes, prof1.frames, prof1.ref_frames
        )
        t0 = time.perf_counter()
        engine = PipelineEngine(bundle, dev, prof, compile_mode=mode, encode_weights_fp16=fp16_weights)
        torch.cuda.synchronize()
        weights_mb = (torch.cuda.memory_allocated() - base) / 2**20
        wav, _ = engine(utt)
        build_s = time.perf_counter() - t0
        for _ in range(5):
            engine(utt)
        # Serving memory: the engine's own weights, graph pools and activations, not the compile's transients.
        torch.cuda.synchronize()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        ms = []
        for _ in range(args.repeats):
            torch.cuda.synchronize()
            s = time.perf_counter()
            wav, _ = engine(utt)
            wav = wav.cpu()
            ms.append((time.perf_counter() - s) * 1e3)
        r: dict[str, Any] = {
            "e2e": latency_stats([m / 1e3 for m in ms]),
            "l1": log_mel_l1(wav[:, : FRAMES * HOP_LENGTH], reference),
            "build_s": build_s,
            "peak_mb": (torch.cuda.max_memory_allocated() - base) / 2**20,
            "weights_mb": weights_mb,  # the engine's own weights (allocated after construction)
            "resident_mb": (torch.cuda.memory_allocated() - base) / 2**20,  # + graph pools and static buffers
            "info": engine.info,
        }
        sweep = {}
        for b in batches[1:]:
            if time.perf_counter() - T0 > args.budget_s:
                break
            inputs = batched(utt, b)
            engine(inputs)
            bms = []
            for _ in range(10):
                torch.cuda.synchronize()
                s = time.perf_counter()
                out, _ = engine(inputs)
                out.cpu()
                bms.append((time.perf_counter() - s) * 1e3)
            sweep[str(b)] = {
                "latency_ms": float(np.median(bms)),
                "audio_s_per_s": b * FRAMES / 93.75 / (float(np.median(bms)) / 1e3),
            }
        r["batch_sweep"] = sweep
        report["variants"][label] = r
        print(label, json.dumps(r)[:600], flush=True)
        save()

    steps: list[tuple[str, Callable[[], None]]] = [
        ("eager-fp32", lambda: engines_variant("eager-fp32", eager, prof=False)),
        ("pipeline-default", lambda: pipeline("pipeline-default", "default", (1, 8, 32, 64))),
        ("pipeline-eager-kernels", lambda: pipeline("pipeline-eager-kernels", None, (1,))),
        ("pipeline-enc-fp32-weights", lambda: pipeline("pipeline-enc-fp32-weights", "default", (1,), False)),
        ("inductor-enc32-bf16", inductor_mixed),
    ]
    wanted = {v for v in args.variants.split(",") if v}
    for label, step in steps:
        if wanted and label not in wanted:
            continue
        t0 = time.perf_counter()
        try:
            step()
        except Exception:
            report["variants"][label] = {"error": traceback.format_exc()[-3000:]}
            print(label, "FAILED", traceback.format_exc()[-1500:], flush=True)
            save()
        print(f"[{label}: {time.perf_counter() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
