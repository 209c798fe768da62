"""Teacher against its distilled students against Piper, on the CPU, in one process and rotating turns.

Every model runs its `auto` engine set on the bench's three English texts (the same target lengths, so the
same frames); Piper en_US-joe-medium speaks the same texts. Per text: P50 of end to end and of each module, and
the ratios that matter (student/teacher, Piper/student per audio second).

    .venv/bin/python benchmarks/probes/distill_ab.py --teacher models/rtvox-small --student DIR [--student DIR2] \
        --repeats 15 -o benchmarks/results/distill/ab-cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.engines.base import BuildOptions
from rtvox.engines.bench import BENCH_TEXTS, Variant, build_variant, interleaved, run_once, text_chunks
from rtvox.engines.bench_run import piper_runner
from rtvox.engines.cache import runtime_versions
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", type=Path, required=True)
    parser.add_argument("--student", type=Path, action="append", required=True, help="repeat for several")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    device = torch.device("cpu")
    options = BuildOptions(profile=ShapeProfile.preset("default"))
    bundles = {"teacher": ModelBundle.load(args.teacher)}
    bundles |= {s.name: ModelBundle.load(s) for s in args.student}
    engines = {}
    picks = {}
    for name, bundle in bundles.items():
        variant = Variant("auto", "float32")
        engines[name] = build_variant(bundle, variant, device, options, BENCH_TEXTS)
        picks[name] = variant.result.get("engines")
    piper = piper_runner(threads=torch.get_num_threads())
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"platform": platform.platform(), "cpu_threads": torch.get_num_threads()},
        "versions": runtime_versions(),
        "teacher": str(args.teacher),
        "students": [str(s) for s in args.student],
        "engines": picks,
        "repeats": args.repeats,
        "texts": {},
    }
    for text_name, (text, seconds) in BENCH_TEXTS.items():
        chunks = {name: text_chunks(bundle, text, seconds) for name, bundle in bundles.items()}
        audio_s = sum(int(c.target_frames.sum()) for c in chunks["teacher"]) * HOP_LENGTH / SAMPLE_RATE
        piper_audio: list[float] = []

        def run_piper(text: str = text, into: list[float] = piper_audio) -> dict[str, float]:
            elapsed, audio = piper(text)
            into.append(audio)
            return {"e2e": elapsed}

        runners: dict[str, Callable[[], dict[str, float]]] = {
            name: partial(run_once, engines[name], chunks[name], device) for name in bundles
        }
        runners["piper"] = run_piper
        samples = interleaved(runners, args.repeats)
        row: dict = {"audio_s": audio_s, "piper_audio_s": piper_audio[-1]}
        for name, runs in samples.items():
            row[name] = {k: statistics.median(r[k] for r in runs) * 1e3 for k in runs[0]}
        t, p = row["teacher"]["e2e"], row["piper"]["e2e"]
        piper_per_s = p / row["piper_audio_s"]
        row["piper_over_teacher_per_audio_s"] = piper_per_s / (t / audio_s)
        line = f"{text_name}: P50 e2e teacher {t:.1f} ms ({row['piper_over_teacher_per_audio_s']:.2f}x Piper)"
        for name in bundles:
            if name == "teacher":
                continue
            s = row[name]["e2e"]
            row[f"{name}_over_teacher"] = s / t
            row[f"piper_over_{name}_per_audio_s"] = piper_per_s / (s / audio_s)
            line += f", {name} {s:.1f} ms ({s / t:.2f} of teacher, {row[f'piper_over_{name}_per_audio_s']:.2f}x Piper)"
        print(line + f"; piper {p:.1f} ms", flush=True)
        report["texts"][text_name] = row
        modules = {name: {k: round(v, 1) for k, v in row[name].items()} for name in bundles}
        print(f"  P50 per module (ms): {modules}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
