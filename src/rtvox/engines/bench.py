"""`rtvox bench`: backend × precision → per-module and end-to-end latency, RTF, batch throughput, peak memory,
quality against eager fp32, FLOPs/bytes per second of audio and roofline distance; JSON, a Markdown table and
a PNG chart.

Texts are English (so the Piper comparison reads the same words) at ≈2, 5 and 15 s of speech; their frame
count is pinned with the acoustic model's exact-duration input so every backend times the same amount of
audio (and an untrained model's durations cannot skew the timing). Each text runs chunk by chunk, batch 1,
as the Synthesizer does; warm-up runs are excluded; on CUDA every module time is taken between
synchronizations.
"""

from __future__ import annotations

import copy
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, SAMPLE_RATE
from rtvox.engines.base import BuildOptions, Engine
from rtvox.engines.build import build_engines, describe_engines, parse_dtype
from rtvox.engines.quality import PipelineInputs, log_mel_l1, run_pipeline
from rtvox.models.bundle import ModelBundle

# name -> (text, seconds of speech it is pinned to)
BENCH_TEXTS: dict[str, tuple[str, float]] = {
    "short": ("The museum opens at nine today.", 2.0),
    "medium": ("Please call me back this afternoon, because the delivery for the new office arrived early.", 5.0),
    "long": (
        "The train to the coast leaves every hour from the main station. On weekends it is often full, so we "
        "usually buy our tickets a few days ahead. Last summer we took the early train, watched the sun rise "
        "over the fields, and reached the beach before the crowds.",
        15.0,
    ),
}
BATCHES: tuple[int, ...] = (1, 8, 32, 64)
TURN_PAUSE_S = 0.05  # between interleaved turns (see `interleaved`)
DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
MODULE_NAMES: tuple[str, ...] = ("acoustic_encode", "acoustic_decode", "vocoder")


def latency_stats(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    return {"mean_ms": float(ms.mean()), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def text_chunks(bundle: ModelBundle, text: str, seconds: float, *, single: bool = False) -> list[PipelineInputs]:
    """The text's chunks as batch-1 inputs (default voice, neutral), frames shared in proportion to phonemes.
    single: all phonemes in one row (the batch sweep's unit of work; the Synthesizer would split it)."""
    from rtvox.models.emotion import fuse_condition
    from rtvox.models.prosody import IDENTITY_ROW
    from rtvox.text import Frontend, Vocabulary

    vocab = Vocabulary.from_dict(bundle.vocab)
    chunks = Frontend().process(text).chunks
    ids = [vocab.encode_for_model(c.phonemes, bundle.config.skip_symbols)[0] for c in chunks]
    if single:
        ids = [[i for row in ids for i in row]]
    total = round(seconds * FRAMES_PER_SECOND)
    counts = [len(i) for i in ids]
    targets = [max(1, round(total * c / sum(counts))) for c in counts]
    targets[-1] += total - sum(targets)
    speaker = next(iter(bundle.voices.values())).float().cpu()[None]
    with torch.no_grad():
        emotion = bundle.emotion_table(torch.tensor([0], device=next(bundle.emotion_table.parameters()).device))
        cond = fuse_condition(speaker, emotion.float().cpu(), torch.ones(1))
    one = torch.ones(1)
    return [
        PipelineInputs(
            torch.tensor([i]),
            torch.ones(1, len(i), dtype=torch.bool),
            cond,
            one,
            torch.tensor([t]),
            one,
            one,
            torch.tensor([IDENTITY_ROW]),
        )
        for i, t in zip(ids, targets, strict=True)
    ]


def vocoder_calibration(bundle: ModelBundle, texts: dict[str, tuple[str, float]]) -> list[tuple[torch.Tensor, ...]]:
    """Mels of real sentences (the bench texts through the eager acoustic model): static int8 calibration."""
    device = next(bundle.acoustic.parameters()).device
    mels: list[tuple[torch.Tensor, ...]] = []
    with torch.inference_mode():
        for text, seconds in texts.values():
            for chunk in text_chunks(bundle, text, seconds):
                hidden, durations = bundle.acoustic.encode(*chunk.tensors(device))
                mels.append((bundle.acoustic.decode(hidden, durations).cpu(),))
    return mels


def batched(inputs: PipelineInputs, batch: int) -> PipelineInputs:
    def rep(t: torch.Tensor) -> torch.Tensor:
        return t.repeat(batch, *([1] * (t.dim() - 1)))

    return PipelineInputs(*(rep(getattr(inputs, f)) for f in PipelineInputs.__dataclass_fields__))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_once(engines: dict[str, Engine], chunks: list[PipelineInputs], device: torch.device) -> dict[str, float]:
    """Seconds spent per module and end to end ("e2e") running every chunk once."""
    spent = dict.fromkeys(MODULE_NAMES, 0.0)
    _sync(device)
    start = time.perf_counter()
    for chunk in chunks:
        t0 = time.perf_counter()
        hidden, durations = engines["acoustic_encode"](*chunk.tensors(device))
        _sync(device)
        t1 = time.perf_counter()
        (mel,) = engines["acoustic_decode"](hidden, durations)
        _sync(device)
        t2 = time.perf_counter()
        (wav,) = engines["vocoder"](mel)
        _ = wav[:, : int(durations.sum(1).max()) * HOP_LENGTH].cpu()  # the audio leaves the device
        t3 = time.perf_counter()
        spent["acoustic_encode"] += t1 - t0
        spent["acoustic_decode"] += t2 - t1
        spent["vocoder"] += t3 - t2
    spent["e2e"] = time.perf_counter() - start
    return spent


def summarize(samples: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "e2e": latency_stats([x["e2e"] for x in samples]),
        "modules": {m: latency_stats([x[m] for x in samples]) for m in MODULE_NAMES},
    }


def time_pipeline(
    engines: dict[str, Engine], chunks: list[PipelineInputs], device: torch.device, repeats: int, warmup: int = 2
) -> dict[str, Any]:
    """Per-module and end-to-end times of running every chunk once (batch as given), `repeats` times."""
    for _ in range(warmup):
        run_once(engines, chunks, device)
    return summarize([run_once(engines, chunks, device) for _ in range(repeats)])


def variant_label(backend: str, dtype: str) -> str:
    """A table row's key: backend-dtype, or "auto" (its dtype is one pick per module)."""
    return "auto" if backend == "auto" else f"{backend}-{dtype}"


@dataclass
class Variant:
    """One row of the table: a backend at a precision."""

    backend: str
    dtype: str
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return variant_label(self.backend, self.dtype)


def build_variant(
    bundle: ModelBundle,
    variant: Variant,
    device: torch.device,
    options: BuildOptions,
    texts: dict[str, tuple[str, float]],
) -> dict[str, Engine]:
    """The variant's engines. dtype syntax: `int8[-METHOD][@MODULE+MODULE...]`: "int8-static" = ORT static int8
    calibrated on the texts' mels; "@acoustic_decode+vocoder" = which modules get int8 (default
    BuildOptions.int8_modules)."""
    spec, _, modules = variant.dtype.partition("@")
    dtype_name, _, method = spec.partition("-")
    int8_modules = tuple(m for m in modules.split("+") if m) or options.int8_modules
    if method == "static" and set(int8_modules) - {"vocoder"}:
        raise ValueError(f"{variant.label}: static int8 is calibrated on mels, so it applies to the vocoder only")
    if method or modules:
        options = copy.copy(options)
        options.int8_modules = int8_modules
    if method:
        options.int8_method = method
        options.calibration = vocoder_calibration(bundle, texts)
    t0 = time.perf_counter()
    engines = build_engines(bundle, variant.backend, device, parse_dtype(dtype_name), options=options)
    variant.result["build_s"] = round(time.perf_counter() - t0, 2)
    variant.result["engines"] = describe_engines(engines)
    return engines


def interleaved(
    runners: dict[str, Callable[[], dict[str, float]]], repeats: int, warmup: int = 2
) -> dict[str, list[dict[str, float]]]:
    """Raw samples per runner, runners taking turns run by run (the order rotating), so a shared machine's
    changing load falls on every variant alike instead of on whichever ran during a busy minute."""
    labels = list(runners)
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    for r in range(warmup + repeats):
        shift = r % max(len(labels), 1)
        for label in labels[shift:] + labels[:shift]:
            # A pause between turns: ONNX Runtime's pool threads (Piper's session, with its default settings)
            # spin after a run and would otherwise take the cores from whichever runner comes next.
            time.sleep(TURN_PAUSE_S)
            sample = runners[label]()
            if r >= warmup:
                samples[label].append(sample)
    return samples


# A reference system timed in the same turns: text -> (seconds spent, seconds of audio it produced).
ExternalRunner = Callable[[str], tuple[float, float]]


def bench_variants(
    bundle: ModelBundle,
    variants: list[Variant],
    device: torch.device,
    options: BuildOptions,
    repeats: int,
    batches: tuple[int, ...],
    texts: dict[str, tuple[str, float]],
    external: dict[str, ExternalRunner] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Build every variant (a failure is recorded in its row), then time them interleaved with the external
    systems (Piper): every text at batch 1, then the batch sweep on the medium text as one row; quality
    against the first variant. Returns (variant rows, {external label: {"texts": ...}})."""
    external = external or {}
    ext_results: dict[str, dict[str, Any]] = {label: {"texts": {}} for label in external}
    ext_audio: dict[str, float] = {}
    built: dict[str, dict[str, Engine]] = {}
    for v in variants:
        v.result.update({"backend": v.backend, "dtype": v.dtype})
        try:
            built[v.label] = build_variant(bundle, v, device, options, texts)
        except Exception as exc:  # one failing backend must not lose the other rows
            v.result["error"] = repr(exc)[:500]
    reference: dict[str, torch.Tensor] = {}
    for name, (text, seconds) in texts.items():
        chunks = text_chunks(bundle, text, seconds)
        audio_s = sum(int(c.target_frames.sum()) for c in chunks) * HOP_LENGTH / SAMPLE_RATE
        runners: dict[str, Callable[[], dict[str, float]]] = {
            label: partial(run_once, engines, chunks, device) for label, engines in built.items()
        }
        for label, fn in external.items():

            def run_external(fn: ExternalRunner = fn, label: str = label, text: str = text) -> dict[str, float]:
                elapsed, ext_audio[label] = fn(text)
                return {"e2e": elapsed}

            runners[label] = run_external
        samples = interleaved(runners, repeats)
        for label in external:
            stats = latency_stats([x["e2e"] for x in samples[label]])
            rtf = stats["mean_ms"] / 1e3 / ext_audio[label]
            ext_results[label]["texts"][name] = {"e2e": stats, "audio_s": ext_audio[label], "rtf": rtf}
        for v in variants:
            if v.label not in built:
                continue
            timing = summarize(samples[v.label])
            timing |= {"audio_s": audio_s, "chunks": len(chunks), "rtf": timing["e2e"]["mean_ms"] / 1e3 / audio_s}
            wav = torch.cat([run_pipeline(built[v.label], c, device)[0][0] for c in chunks])
            if name in reference:
                timing["log_mel_l1_vs_eager_fp32"] = log_mel_l1(wav[None], reference[name][None])
            else:
                reference[name] = wav
            v.result.setdefault("texts", {})[name] = timing
    medium = text_chunks(bundle, *texts["medium"], single=True) if "medium" in texts else []
    for batch in batches:
        if len(medium) != 1 or batch > options.profile.batch.max:
            continue
        audio_s = batch * int(medium[0].target_frames) * HOP_LENGTH / SAMPLE_RATE
        rows = [batched(medium[0], batch)]
        runners = {label: partial(run_once, engines, rows, device) for label, engines in built.items()}
        samples = interleaved(runners, max(2, repeats // 4), warmup=1)
        for v in variants:
            if v.label in built:
                ms = latency_stats([x["e2e"] for x in samples[v.label]])["mean_ms"]
                v.result.setdefault("throughput", {})[str(batch)] = {
                    "latency_ms": ms,
                    "audio_s_per_s": audio_s / (ms / 1e3),
                }
    if device.type == "cuda":
        for v in variants:
            v.result["peak_mem_mb_all_variants"] = torch.cuda.max_memory_allocated(device) / 2**20
    del built
    gc.collect()
    return [v.result for v in variants], ext_results


def _dtype_cell(result: dict[str, Any]) -> str:
    """The dtype column; for `auto` (one pick per module) each module's backend and dtype."""
    if result.get("backend") != "auto" or not result.get("engines"):
        return str(result["dtype"])
    short = {"acoustic_encode": "enc", "acoustic_decode": "dec", "vocoder": "voc"}
    picks = result["engines"].items()
    return ", ".join(f"{short.get(m, m)} {e['backend']} {DTYPE_SHORT.get(e['dtype'], e['dtype'])}" for m, e in picks)


def markdown_table(results: list[dict[str, Any]], piper: dict[str, Any] | None = None) -> str:
    """The BENCHMARKS.md table: one row per variant, e2e mean/P50/P99 and RTF per text, batch throughput."""
    texts = list(BENCH_TEXTS)
    head = ["backend", "dtype"] + [f"{t} e2e mean/P50/P99 ms (RTF)" for t in texts]
    head += ["voc/acoustic ms (medium)", "log-mel L1", "audio-s/s @ batch 1/8/32/64"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['dtype']} | failed: {str(r['error'])[:80]} |")
            continue
        cells = [r["backend"], _dtype_cell(r)]
        for t in texts:
            x = r["texts"].get(t)
            cells.append(
                "–"
                if x is None
                else f"{x['e2e']['mean_ms']:.1f}/{x['e2e']['p50_ms']:.1f}/{x['e2e']['p99_ms']:.1f} ({x['rtf']:.4f})"
            )
        med = r["texts"].get("medium", {}).get("modules", {})
        if med:
            acoustic = med["acoustic_encode"]["mean_ms"] + med["acoustic_decode"]["mean_ms"]
            cells.append(f"{med['vocoder']['mean_ms']:.1f}/{acoustic:.1f}")
        else:
            cells.append("–")
        l1 = [x.get("log_mel_l1_vs_eager_fp32") for x in r["texts"].values()]
        cells.append("–" if None in l1 or not l1 else f"{max(v for v in l1 if v is not None):.4f}")
        tp = r.get("throughput", {})
        cells.append(
            " / ".join(
                f"{tp[b]['audio_s_per_s']:.0f}" if "audio_s_per_s" in tp.get(b, {}) else "–"
                for b in ("1", "8", "32", "64")
            )
        )
        lines.append("| " + " | ".join(cells) + " |")
    if piper:
        cells = ["piper joe-medium (onnxruntime)", "fp32"]
        for t in texts:
            x = piper["texts"].get(t)
            cells.append(
                "–"
                if x is None
                else f"{x['e2e']['mean_ms']:.1f}/{x['e2e']['p50_ms']:.1f}/{x['e2e']['p99_ms']:.1f} ({x['rtf']:.4f})"
            )
        lines.append("| " + " | ".join([*cells, "–", "–", "–"]) + " |")
    return "\n".join(lines) + "\n"


def chart(results: list[dict[str, Any]], path: Path, piper: dict[str, Any] | None = None) -> Path | None:
    """Grouped bars: end-to-end mean latency per text, one bar per variant (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [(f"{r['backend']}-{r['dtype']}", r["texts"]) for r in results if "texts" in r]
    if piper:
        rows.append(("piper", piper["texts"]))
    texts = list(BENCH_TEXTS)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(rows), 1)
    for i, (label, data) in enumerate(rows):
        values = [data[t]["e2e"]["mean_ms"] if t in data else 0.0 for t in texts]
        ax.bar(np.arange(len(texts)) + i * width, values, width, label=label)
    ax.set_xticks(np.arange(len(texts)) + width * (len(rows) - 1) / 2)
    ax.set_xticklabels([f"{t} ({BENCH_TEXTS[t][1]:.0f} s)" for t in texts])
    ax.set_ylabel("end-to-end latency, ms (log)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("rtvox engines: batch 1, mean of runs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def speedups(results: list[dict[str, Any]], piper: dict[str, Any] | None) -> dict[str, Any]:
    """Speed of each variant against eager fp32 (and Piper's RTF against each variant's) per text."""
    base = next((r for r in results if r.get("backend") == "eager" and r.get("dtype") == "float32"), None)
    out: dict[str, Any] = {}
    for r in results:
        if "texts" not in r:
            continue
        label = variant_label(r["backend"], r["dtype"])
        out[label] = {}
        for t, x in r["texts"].items():
            row: dict[str, float] = {}
            if base is not None and t in base["texts"]:
                row["vs_eager_fp32"] = base["texts"][t]["e2e"]["mean_ms"] / x["e2e"]["mean_ms"]
            if piper is not None and t in piper["texts"]:
                p = piper["texts"][t]
                row["vs_piper_rtf"] = p["rtf"] / x["rtf"]  # mean latency per audio second
                # the same from medians (a run's outliers move means; Piper speaks its own length of audio)
                row["vs_piper_rtf_p50"] = (p["e2e"]["p50_ms"] / p["audio_s"]) / (x["e2e"]["p50_ms"] / x["audio_s"])
            out[label][t] = row
    return out
