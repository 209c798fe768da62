"""Where a PipelineEngine's device memory goes: each part's weights as it is built, then the stack of every block
still allocated after warm-up (grouped by the rtvox frames of its allocation stack), resident and peak.

    CUBLAS_WORKSPACE_CONFIG=:4096:1 PYTHONPATH=$PWD/src python3 benchmarks/probes/gpu_memory_probe.py OUTDIR \
        [--model models/rtvox-small]        # writes OUTDIR/mem.json; CUDA only

The utterance and profile are gpu_pipeline_probe.py's (120 phonemes, 938 frames, batch 1). Found with it
(2026-12-07, BENCHMARKS.md "One capture stream per device"): a cuBLAS workspace per capture warm-up stream,
now one per device.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
from pathlib import Path

import torch

import rtvox.engines.pipeline as P
from rtvox.engines.build import build_engines
from rtvox.engines.modules import cast_module, store_weights_fp16
from rtvox.engines.pipeline import PipelineEngine
from rtvox.engines.quality import random_inputs, run_pipeline
from rtvox.engines.shapes import AxisRange, ShapeProfile
from rtvox.models.bundle import ModelBundle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", type=Path, default=Path("models/rtvox-small"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    bundle = ModelBundle.load(args.model, device="cpu")
    cfg = bundle.config.acoustic
    utt = random_inputs([120], cfg.cond_dim, cfg.vocab_size, [938], seed=1)
    bundle.acoustic.to(dev).eval()
    bundle.vocoder.to(dev).eval()
    eager = build_engines(bundle, "eager", dev)  # as the fast-path probe: the eager engines stay resident
    with torch.inference_mode():
        run_pipeline(eager, utt, dev)

    def mb() -> float:
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated() / 2**20

    gc.collect()
    torch.cuda.empty_cache()
    rep: dict[str, object] = {}
    b0 = mb()
    enc = P._without(cast_module(bundle.acoustic, dev, torch.float32), P._DECODER_PARTS)
    gc.collect()
    rep["encoder_fp32_mb"] = mb() - b0
    store_weights_fp16(enc)
    gc.collect()
    rep["encoder_stored_fp16_mb"] = mb() - b0
    dec = P._without(cast_module(bundle.acoustic, dev, torch.bfloat16), P._ENCODER_PARTS)
    gc.collect()
    rep["plus_decoder_bf16_mb"] = mb() - b0
    voc = cast_module(bundle.vocoder, dev, torch.bfloat16)
    gc.collect()
    rep["plus_vocoder_bf16_mb"] = mb() - b0
    del enc, dec, voc
    gc.collect()

    frames = AxisRange(2, 1024, 1024, (1024,))
    prof = ShapeProfile(
        "probe-b", AxisRange(1, 1, 1, (1,)), AxisRange(2, 128, 128, (128,)), frames, AxisRange(2, 512, 512, (512,))
    )
    torch.cuda.memory._record_memory_history(max_entries=200000)
    gc.collect()
    torch.cuda.empty_cache()
    b1 = mb()
    engine = PipelineEngine(bundle, dev, prof, compile_mode="default")
    rep["pipeline_weights_mb"] = mb() - b1
    for _ in range(6):
        engine(utt)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    rep["resident_mb"] = mb() - b1
    engine(utt)
    torch.cuda.synchronize()
    rep["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20 - b1
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    groups: collections.Counter[tuple[str, bool]] = collections.Counter()
    for seg in snap["segments"]:
        in_pool = tuple(seg.get("segment_pool_id") or (0, 0)) != (0, 0)
        for blk in seg["blocks"]:
            if blk["state"] != "active_allocated":
                continue
            where = [f for f in blk.get("frames", []) if "rtvox" in f["filename"] or "probe" in f["filename"]]
            key = " < ".join(f"{os.path.basename(f['filename'])}:{f['line']}:{f['name']}" for f in where)[:300]
            groups[(key or "? (before the recording: bundle, eager engines)", in_pool)] += blk["size"]
    rep["live_blocks_mb"] = [(k, pool, round(v / 2**20, 3)) for (k, pool), v in groups.most_common(40)]
    (args.out / "mem.json").write_text(json.dumps(rep, indent=1))
    print(json.dumps({k: v for k, v in rep.items() if k != "live_blocks_mb"}, indent=1))


if __name__ == "__main__":
    main()
