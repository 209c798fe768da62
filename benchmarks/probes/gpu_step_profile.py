"""Where a serving step's GPU time goes: the graphs backend's two programs run uncaptured (eager kernels, bf16
frame-rate half) under torch.profiler on 32 later chunks of the load bench's texts; top CUDA kernels to stdout
and OUT/gpu_step_profile.json.

    python3 benchmarks/probes/gpu_step_profile.py OUT_DIR --model models/rtvox-small
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from rtvox.engines.pipeline import PipelineEngine, _pad
from rtvox.engines.quality import PipelineInputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.runtime.loadbench import make_texts
from rtvox.runtime.steps import encode_inputs
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--rows", type=int, default=32)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    synth = Synthesizer(args.model, device="cpu", backend="eager")
    prepared = [synth.prepare(SynthesisRequest(text=t.text)) for t in make_texts(256, 0)]
    later = [(p, i) for p in prepared for i in range(1, len(p.chunks))][: args.rows]
    rows = [(p.chunks[i].ids, p.cond, p.request, 0, p.prosody) for p, i in later]
    inputs = PipelineInputs(*encode_inputs(rows, torch.device("cpu")))
    dev = torch.device("cuda")
    engine = PipelineEngine(synth.bundle, dev, ShapeProfile.preset("serve"), compile_mode=None)
    tensors = inputs.tensors("cpu")
    batch = engine.profile.batch.bucket(tensors[0].shape[0])
    phon = engine.profile.phonemes.bucket(tensors[0].shape[1])
    static = [_pad(t, batch, phon if i < 2 else None).to(dev) for i, t in enumerate(tensors)]
    tilt = torch.zeros(batch, device=dev)
    result: dict[str, object] = {"rows": len(rows), "batch_bucket": batch, "phoneme_bucket": phon}
    with torch.inference_mode():
        hidden, durations = engine._encode_fn(*static)
        lengths = durations.sum(1)
        frames = engine.profile.frames.bucket(int(lengths.max()))
        result.update(frames_bucket=frames, frames_mean=float(lengths[: len(rows)].float().mean()))
        for _ in range(3):
            engine._decode_fn(hidden, durations, tilt, frames)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(5):
                hidden, durations = engine._encode_fn(*static)
                engine._decode_fn(hidden, durations, tilt, frames)
            torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30)
    print(json.dumps(result))
    print(table)
    events = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:40]
    result["top"] = [
        {"name": e.key[:120], "cuda_ms_per_step": e.device_time_total / 5 / 1000, "calls_per_step": e.count / 5}
        for e in events
    ]
    (args.out / "gpu_step_profile.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
