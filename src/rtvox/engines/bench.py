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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, SAMPLE_RATE
from rtvox.engines.base import BuildOptions, Engine
from rtvox.engines.build import build_engines, parse_dtype
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


def latency_stats(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    return {"mean_ms": float(ms.mean()), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def text_chunks(bundle: ModelBundle, text: str, seconds: float, *, single: bool = False) -> list[PipelineInputs]:
    """The text's chunks as batch-1 inputs (default voice, neutral), frames shared in proportion to phonemes.
    single: all phonemes in one row (the batch sweep's unit of work; the Synthesizer would split it)."""
    from rtvox.models.emotion import fuse_condition
    from rtvox.text import Frontend, Vocabulary

    vocab = Vocabulary.from_dict(bundle.vocab)
    chunks = Frontend().process(text).chunks
    ids = [vocab.encode(list(c.phonemes)) for c in chunks]
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
            torch.tensor([i]), torch.ones(1, len(i), dtype=torch.bool), cond, one, torch.tensor([t]), one, one
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


def time_pipeline(
    engines: dict[str, Engine], chunks: list[PipelineInputs], device: torch.device, repeats: int, warmup: int = 2
) -> dict[str, Any]:
    """Per-module and end-to-end times of running every chunk once (batch as given), `repeats` times."""
    per_module: dict[str, list[float]] = {m: [] for m in ("acoustic_encode", "acoustic_decode", "vocoder")}
    e2e: list[float] = []
    for r in range(warmup + repeats):
        spent = dict.fromkeys(per_module, 0.0)
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
        total = time.perf_counter() - start
        if r >= warmup:
            e2e.append(total)
            for m, s in spent.items():
                per_module[m].append(s)
    return {"e2e": latency_stats(e2e), "modules": {m: latency_stats(v) for m, v in per_module.items()}}


@dataclass
class Variant:
    """One row of the table: a backend at a precision."""

    backend: str
    dtype: str
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.backend}-{self.dtype}"


def bench_variant(
    bundle: ModelBundle,
    variant: Variant,
    device: torch.device,
    options: BuildOptions,
    repeats: int,
    batches: tuple[int, ...],
    texts: dict[str, tuple[str, float]],
    reference: dict[str, torch.Tensor] | None,
    budget_s: float = 120.0,
) -> dict[str, Any]:
    """Build the variant's engines, time every text and batch size, measure quality and memory."""
    out: dict[str, Any] = {"backend": variant.backend, "dtype": variant.dtype}
    dtype_name, _, method = variant.dtype.partition("-")  # "int8-static": ORT static int8, calibrated
    if method:
        options = copy.copy(options)
        options.int8_method = method
        options.calibration = vocoder_calibration(bundle, texts)
    t0 = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    engines = build_engines(bundle, variant.backend, device, parse_dtype(dtype_name), options=options)
    out["build_s"] = round(time.perf_counter() - t0, 2)
    out["engines"] = {k: getattr(e, "info", {}) for k, e in engines.items()}
    started = time.perf_counter()
    out["texts"] = {}
    audio: dict[str, torch.Tensor] = {}
    for name, (text, seconds) in texts.items():
        chunks = text_chunks(bundle, text, seconds)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        timing = time_pipeline(engines, chunks, device, repeats)
        audio_s = sum(int(c.target_frames.sum()) for c in chunks) * HOP_LENGTH / SAMPLE_RATE
        timing["audio_s"] = audio_s
        timing["chunks"] = len(chunks)
        timing["rtf"] = timing["e2e"]["mean_ms"] / 1e3 / audio_s
        if device.type == "cuda":
            timing["peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        wav = torch.cat([run_pipeline(engines, c, device)[0][0] for c in chunks])
        audio[name] = wav
        if reference is not None and name in reference:
            timing["log_mel_l1_vs_eager_fp32"] = log_mel_l1(wav[None], reference[name][None])
        out["texts"][name] = timing
    out["throughput"] = {}
    medium = text_chunks(bundle, *texts["medium"], single=True) if "medium" in texts else None
    for batch in batches:
        if medium is None or len(medium) != 1 or batch > options.profile.batch.max:
            continue
        if time.perf_counter() - started > budget_s:
            out["throughput"][str(batch)] = {"skipped": "time budget"}
            continue
        timing = time_pipeline(engines, [batched(medium[0], batch)], device, max(2, repeats // 4), warmup=1)
        audio_s = batch * int(medium[0].target_frames) * HOP_LENGTH / SAMPLE_RATE
        out["throughput"][str(batch)] = {
            "latency_ms": timing["e2e"]["mean_ms"],
            "audio_s_per_s": audio_s / (timing["e2e"]["mean_ms"] / 1e3),
        }
    if device.type == "cuda":
        out["peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    out["_audio"] = audio
    del engines
    gc.collect()
    return out


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
        cells = [r["backend"], r["dtype"]]
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
        label = f"{r['backend']}-{r['dtype']}"
        out[label] = {}
        for t, x in r["texts"].items():
            row: dict[str, float] = {}
            if base is not None and t in base["texts"]:
                row["vs_eager_fp32"] = base["texts"][t]["e2e"]["mean_ms"] / x["e2e"]["mean_ms"]
            if piper is not None and t in piper["texts"]:
                row["vs_piper_rtf"] = piper["texts"][t]["rtf"] / x["rtf"]
            out[label][t] = row
    return out
