"""Every GPU engine of the default model in one run: build, parity with eager fp32, latency, memory, roofline.

    PYTHONUNBUFFERED=1 python benchmarks/gpu_engines.py OUTDIR [--budget-s 420] [--model DIR] [--smoke]

Steps run in priority order while the global time budget lasts (eager fp32; inductor bf16 and aoti bf16; the
reference vocoder with the Triton kernels; the AOTInductor load probe; the batch sweep; the other precisions;
the roofline table), each in its own try/except with its error recorded; a watchdog saves and exits 45 s past
the budget. For a 10-s utterance at batch 1 (one chunk, 120 phonemes, 938 frames):
per-module and end-to-end latency (mean/P50/P99), peak device memory, log-mel L1 against eager fp32; then the
batch sweep (1/8/32/64) for eager and the best compiled variants; FLOPs/bytes per second of audio and each
variant's distance from the H200 roofline floor; the reference-size HiFi-GAN V1 vocoder alone (random
weights) eager vs compiled vs the fused Triton kernels; the AOTInductor load-path probe. Writes
OUTDIR/gpu_engines.json (rewritten after every step, so a kill keeps what was done) and OUTDIR/gpu_engines.log.
--smoke runs a short CPU version of the same steps (what CI-side checks use).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYTHONUNBUFFERED", "1")
# Importable without an install, here and in the child processes (AOTInductor load probes).
_SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, _SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)

import torch  # noqa: E402 - after the sys.path setup above

from rtvox.constants import FRAMES_PER_SECOND  # noqa: E402 - after the sys.path setup above
from rtvox.engines.base import BuildOptions, Engine  # noqa: E402 - after the sys.path setup above
from rtvox.engines.bench import batched, time_pipeline  # noqa: E402 - after the sys.path setup above
from rtvox.engines.build import build_engines, parse_dtype  # noqa: E402 - after the sys.path setup above
from rtvox.engines.cache import runtime_versions  # noqa: E402 - after the sys.path setup above
from rtvox.engines.eager import EagerEngine  # noqa: E402 - after the sys.path setup above
from rtvox.engines.quality import PipelineInputs, log_mel_l1, random_inputs, run_pipeline  # noqa: E402 - after the sys.path setup above
from rtvox.engines.roofline import H200, acoustic_and_vocoder_costs  # noqa: E402 - after the sys.path setup above
from rtvox.engines.shapes import AxisRange, ShapeProfile  # noqa: E402 - after the sys.path setup above
from rtvox.models.bundle import ModelBundle  # noqa: E402 - after the sys.path setup above

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 10.0
PHONEMES = 120
# (label, backend, dtype, inductor mode); most important first: the budget may end the list early.
VARIANTS: list[tuple[str, str, str, str | None]] = [
    ("inductor-bf16", "inductor", "bfloat16", "reduce-overhead"),
    ("aoti-bf16", "aoti", "bfloat16", None),
    ("inductor-fp16", "inductor", "float16", "reduce-overhead"),
    ("aoti-fp16", "aoti", "float16", None),
    ("inductor-int8wo", "inductor", "int8", "reduce-overhead"),
    ("inductor-bf16-max-autotune", "inductor", "bfloat16", "max-autotune"),
    ("onnx-fp32", "onnx", "float32", None),
]
SWEEP = ("eager-fp32", "inductor-bf16", "aoti-bf16")
WATCHDOG_GRACE_S = 45.0


def profile(batches: tuple[int, ...], smoke: bool) -> ShapeProfile:
    """Buckets that fit the 10-s utterance (frames 1024, phonemes 128) and the batch sweep."""
    frames, phon = (256, 64) if smoke else (1024, 128)
    batch = AxisRange(1, 1, max(batches), batches)
    return ShapeProfile(
        "gpu-bench" if not smoke else "gpu-smoke",
        batch,
        AxisRange(2, phon, phon, (phon,)),
        AxisRange(2, frames, frames, (frames,)),
        AxisRange(2, 512, 512, (512,)),
    )


class Run:
    """The report and the clock: every step is recorded, timed and saved as it finishes."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out = out
        self.t0 = time.perf_counter()
        self.budget_s = budget_s
        self.report: dict[str, Any] = {"steps": {}, "errors": {}}
        self.log_file = (out / "gpu_engines.log").open("a", encoding="utf-8")

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.t0)

    def log(self, msg: str) -> None:
        line = f"[{time.perf_counter() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def abort(self) -> None:
        self.log(f"watchdog: over budget by {WATCHDOG_GRACE_S}s, saving and exiting")
        self.report["aborted_by_watchdog"] = True
        try:
            self.save()
        except Exception as exc:  # the dict may be mid-update; the log still has the steps
            self.log(f"watchdog could not save: {exc!r}")
        os._exit(3)

    def save(self) -> None:
        self.report["elapsed_s"] = round(time.perf_counter() - self.t0, 1)
        (self.out / "gpu_engines.json").write_text(json.dumps(self.report, indent=1, default=str) + "\n")

    def step(self, name: str, fn: Callable[[], Any], need_s: float = 0.0) -> Any:
        if self.left() < need_s:
            self.report["steps"][name] = {"skipped": f"time budget ({self.left():.0f}s left, needs ~{need_s:.0f}s)"}
            self.log(f"skip {name}: budget")
            self.save()
            return None
        self.log(f"start {name}")
        started = time.perf_counter()
        try:
            result = fn()
            self.report["steps"][name] = result
            self.log(f"done {name} in {time.perf_counter() - started:.1f}s")
        except Exception as exc:  # one failing step must not lose the others
            self.report["errors"][name] = {"error": repr(exc)[:800], "trace": traceback.format_exc()[-3000:]}
            self.log(f"FAILED {name}: {exc!r:.300}")
            result = None
        self.save()
        return result


def allocated(device: torch.device) -> int:
    """Bytes allocated on the device after freeing what is unreferenced (0 on the CPU)."""
    gc.collect()
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated(device)


def eager_engines(bundle: ModelBundle, device: torch.device) -> dict[str, Engine]:
    acoustic = copy.deepcopy(bundle.acoustic).to(device)
    vocoder = copy.deepcopy(bundle.vocoder).to(device)
    return {
        "acoustic_encode": EagerEngine("acoustic_encode", acoustic.encode, device, torch.float32),
        "acoustic_decode": EagerEngine("acoustic_decode", acoustic.decode, device, torch.float32),
        "vocoder": EagerEngine("vocoder", vocoder, device, torch.float32),
    }


def measure(
    engines: dict[str, Engine],
    inputs: PipelineInputs,
    device: torch.device,
    repeats: int,
    reference: torch.Tensor | None,
    base_alloc: int = 0,
) -> dict[str, Any]:
    """Latency, quality and memory of one engine set. Memory counts what this set added on top of
    `base_alloc` (bytes allocated before it was built): its weights, CUDA-graph pools and activations."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    timing = time_pipeline(engines, [inputs], device, repeats)
    wav, _ = run_pipeline(engines, inputs, device)
    if device.type == "cuda":
        timing["peak_mem_mb"] = (torch.cuda.max_memory_allocated(device) - base_alloc) / 2**20
        timing["resident_mb"] = (torch.cuda.memory_allocated(device) - base_alloc) / 2**20
    audio_s = float(inputs.target_frames[0]) / FRAMES_PER_SECOND
    timing["rtf"] = timing["e2e"]["mean_ms"] / 1e3 / audio_s
    if reference is not None:
        timing["log_mel_l1_vs_eager_fp32"] = log_mel_l1(wav, reference)
    timing["_wav"] = wav
    return timing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget-s", type=float, default=400.0, help="steps start only while this lasts")
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "rtvox-base")
    parser.add_argument("--smoke", action="store_true", help="short CPU run of every step")
    parser.add_argument(
        "--only", default=None, help="comma-separated variant labels (e.g. aoti-bf16): eager fp32 and these alone"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    smoke = args.smoke or not torch.cuda.is_available()
    device = torch.device("cpu" if smoke else "cuda")
    repeats = 3 if smoke else 30
    batches = (1, 2) if smoke else (1, 8, 32, 64)
    run = Run(args.out, args.budget_s)
    # Watchdog: a step that overruns the budget (a long autotune) must not cost the whole report.
    watchdog = threading.Timer(args.budget_s + WATCHDOG_GRACE_S, run.abort)
    watchdog.daemon = True
    watchdog.start()
    run.report["env"] = {"versions": runtime_versions(), "platform": platform.platform(), "smoke": smoke}
    if device.type == "cuda":
        run.report["env"]["gpu"] = torch.cuda.get_device_name(device)
    cache = Path(os.environ.get("RTVOX_ENGINE_CACHE", "/tmp/rtvox-engine-cache"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    run.log(f"device {device}, budget {args.budget_s}s, model {args.model}")

    bundle = ModelBundle.load(args.model, device="cpu")
    cfg = bundle.config.acoustic
    frames = round(SECONDS * FRAMES_PER_SECOND) if not smoke else 200
    phonemes = PHONEMES if not smoke else 40
    utterance = random_inputs([phonemes], cfg.cond_dim, cfg.vocab_size, [frames], seed=1)
    run.report["utterance"] = {"seconds": SECONDS, "frames": frames, "phonemes": phonemes}
    prof1 = profile((1,), smoke)
    prof_sweep = profile(batches, smoke)
    results: dict[str, Any] = {}
    run.report["variants"] = results

    # 1. eager fp32: the reference audio, latency and memory.
    start_alloc = allocated(device)
    eager = eager_engines(bundle, device)
    base = run.step("eager-fp32", lambda: measure(eager, utterance, device, repeats, None, start_alloc))
    reference = base.pop("_wav") if base else None
    results["eager-fp32"] = base

    # 2. compiled variants at batch 1.
    # Only eager stays built: every other set is freed after its step so memory figures do not add up.
    built: dict[str, dict[str, Engine]] = {"eager-fp32": eager}
    variants = (
        VARIANTS
        if not smoke
        else [("inductor-fp32", "inductor", "float32", None), ("aoti-fp32", "aoti", "float32", None)]
    )

    def variant_step(label: str, backend: str, dtype: str, mode: str | None) -> None:
        def one(backend: str = backend, dtype: str = dtype, mode: str | None = mode, label: str = label) -> Any:
            options = BuildOptions(profile=prof1, cache_dir=cache, mode=mode)
            before = allocated(device)
            t0 = time.perf_counter()
            engines = build_engines(bundle, backend, device, parse_dtype(dtype), options=options)
            build_s = time.perf_counter() - t0
            result = measure(engines, utterance, device, repeats, reference, before)
            result.pop("_wav")
            result["build_s"] = round(build_s, 1)
            result["engines"] = {k: getattr(e, "info", {}) for k, e in engines.items()}
            if base:
                result["speedup_vs_eager_fp32"] = base["e2e"]["mean_ms"] / result["e2e"]["mean_ms"]
                if "peak_mem_mb" in base:
                    result["peak_mem_vs_eager"] = result["peak_mem_mb"] / base["peak_mem_mb"]
            built[label] = {}  # marks it as built; the sweep rebuilds it with batch buckets
            del engines
            return result

        results[label] = run.step(label, one, need_s=60.0)

    by_label = {v[0]: v for v in variants}

    # 3. batch sweep (dynamic batch for aoti, batch buckets for inductor: built again with the sweep profile).
    def sweep() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label in SWEEP if not smoke else ("eager-fp32", "aoti-fp32"):
            if label not in built or run.left() < 45:
                continue
            backend, _, dtype = label.partition("-")
            if backend == "eager":
                engines = eager
            else:
                dt = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[dtype]
                mode = "reduce-overhead" if backend == "inductor" and not smoke else None
                options = BuildOptions(profile=prof_sweep, cache_dir=cache, mode=mode)
                engines = build_engines(bundle, backend, device, parse_dtype(dt), options=options)
            out[label] = {}
            for b in batches:
                t = time_pipeline(engines, [batched(utterance, b)], device, max(3, repeats // 5), warmup=1)
                ms = t["e2e"]["mean_ms"]
                out[label][str(b)] = {"latency_ms": ms, "audio_s_per_s": b * frames / FRAMES_PER_SECOND / (ms / 1e3)}
        return out

    # 4. roofline: FLOPs and bytes of the default model, each variant's vocoder distance from the floor.
    def roofline() -> dict[str, Any]:
        costs = {c.module: c for c in acoustic_and_vocoder_costs(bundle.acoustic, bundle.vocoder, SECONDS)}
        out: dict[str, Any] = {"costs": {k: c.to_dict(H200) for k, c in costs.items()}, "distance": {}}
        for label, r in results.items():
            if r and "modules" in r:
                out["distance"][label] = {
                    m: r["modules"][m]["mean_ms"] / (costs[m].floor_s(H200) * 1e3) for m in costs if m in r["modules"]
                }
        return out

    # 5. reference-size vocoder (HiFi-GAN V1, random weights): eager vs compiled vs fused Triton kernels.
    def vocoder_v1() -> dict[str, Any]:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from vocoder_kernels_bench import bench_vocoder

        autotune = run.left() > 200  # max-autotune of HiFi-GAN V1 takes minutes: only with time to spare
        return bench_vocoder(device, SECONDS if not smoke else 1.0, repeats, smoke, autotune)  # type: ignore[no-any-return]

    # 6. AOTInductor load paths on this torch (child processes: a segfault is recorded, not fatal).
    def probe() -> Any:
        target = args.out / "aoti_probe"
        cmd = [sys.executable, str(ROOT / "benchmarks" / "probes" / "aoti_load_probe.py"), str(target), device.type]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(30.0, min(240.0, run.left() - 10)))
        path = target / "aoti_probe.json"
        return json.loads(path.read_text()) if path.is_file() else {"rc": proc.returncode, "tail": proc.stderr[-1500:]}

    # Priority order: the acceptance figures first (best variants, reference vocoder + kernels, the load
    # probe, the sweep), then the other precisions; the budget may end the list early.
    first = ["inductor-bf16", "aoti-bf16"] if not smoke else ["inductor-fp32", "aoti-fp32"]
    if args.only:
        first = [label for label in args.only.split(",") if label]
        unknown = [label for label in first if label not in by_label]
        if unknown:
            parser.error(f"--only: unknown variant(s) {unknown}; known: {sorted(by_label)}")
    for label in first:
        variant_step(*by_label[label])
    if not args.only:
        run.step("vocoder_v1", vocoder_v1, need_s=90.0)
        run.step("aoti_probe", probe, need_s=40.0)
        run.step("batch_sweep", sweep, need_s=60.0)
        for label, *rest in variants:
            if label not in first:
                variant_step(label, *rest)
    run.step("roofline", roofline)
    summary = {
        label: {
            **{
                k: r.get(k)
                for k in ("speedup_vs_eager_fp32", "peak_mem_vs_eager", "log_mel_l1_vs_eager_fp32", "rtf", "build_s")
            },
            # what each module computed in (aoti bf16 keeps the encoder fp32: rtvox.engines.aoti.FP32_PACKAGES)
            "compute_dtypes": {m: info.get("compute_dtype") for m, info in r.get("engines", {}).items()},
        }
        for label, r in results.items()
        if r
    }
    run.report["summary"] = summary
    run.save()
    run.log("summary " + json.dumps(summary))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Skip interpreter teardown: CUDA graph pools and compiled libraries sometimes crash at exit, after the work.
    os._exit(0)
