"""Vocoder candidates alone on the CPU (random weights, 5 s of mel): eager vs ONNX Runtime fp32 vs ORT dynamic
int8, timed in rotating turns, with the log-mel L1 of each engine against its eager output.
    .venv/bin/python benchmarks/cpu_vocoders.py [--repeats 10] [--out benchmarks/results/cpu_vocoders.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from rtvox.constants import FRAMES_PER_SECOND, N_MELS
from rtvox.engines import BuildOptions, Engine, build_engine
from rtvox.engines.bench import latency_stats
from rtvox.engines.quality import log_mel_l1
from rtvox.models.vocoder import HiFiGAN, VocoderConfig
from rtvox.models.vocos import Vocos, VocosConfig

SECONDS = 5.0
CPU = torch.device("cpu")


def candidates() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "vocos-small": Vocos(VocosConfig.preset("small")).eval(),
        "hifigan-light": HiFiGAN(VocoderConfig.preset("light")).eval(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "cpu_vocoders.json")
    args = parser.parse_args()
    mel = torch.randn(1, N_MELS, round(SECONDS * FRAMES_PER_SECOND)) - 4.0
    report: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as cache:
        for name, vocoder in candidates().items():
            with torch.no_grad():
                reference = vocoder(mel)
            options = BuildOptions(cache_dir=Path(cache), warmup=False)
            engines: dict[str, Engine] = {"eager-fp32": build_engine("eager", "vocoder", vocoder, CPU, torch.float32)}
            engines["onnx-fp32"] = build_engine("onnx", "vocoder", vocoder, CPU, torch.float32, options)
            engines["onnx-int8"] = build_engine("onnx", "vocoder", vocoder, CPU, torch.int8, options)
            samples: dict[str, list[float]] = {k: [] for k in engines}
            labels = list(engines)
            for r in range(args.repeats + 2):
                for label in labels[r % 3 :] + labels[: r % 3]:
                    t0 = time.perf_counter()
                    (wav,) = engines[label](mel)
                    if r >= 2:
                        samples[label].append(time.perf_counter() - t0)
            report[name] = {}
            for label, xs in samples.items():
                stats = latency_stats(xs)
                (wav,) = engines[label](mel)
                report[name][label] = {
                    **stats,
                    "rtf": stats["p50_ms"] / 1e3 / SECONDS,
                    "log_mel_l1_vs_eager": log_mel_l1(wav, reference),
                }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")  # stdout carries the ONNX exporter's progress
    for name, rows in report.items():
        for label, x in rows.items():
            print(
                f"{name} {label}: P50 {x['p50_ms']:.1f} ms, RTF {x['rtf']:.4f}, "
                f"log-mel L1 {x['log_mel_l1_vs_eager']:.4f}"
            )


if __name__ == "__main__":
    main()
