"""Compose a warm-start snapshot for `rtvox train acoustic --init`: a shipped model's acoustic and emotion weights
beside an aligner trained elsewhere, placed at a chosen step of the learning-rate schedule.

A model directory (`--init models/rtvox-small`) ships no aligner, so a warm start from it alone begins with a fresh
one and thousands of aligner-only steps (T10: 4 000 on the GPU). The aligner depends only on the vocabulary and the
mel features, not on the acoustic model's size, so one trained by any run on the same features (a `tiny` CPU run
does) can be reused; a few hundred `--aligner-only-steps` then fit it to the new text. `--step` puts the run where
the Noam schedule is already decaying (lr × sqrt(warmup / step)), as a resumed run would be, instead of a new
warm-up to the peak rate.

    .venv/bin/python -m recipes.train.compose_init --model models/rtvox-small \
        --aligner /work/ab/warm-neutral/snapshot --step 25291 --out /work/t12cpu/init
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from rtvox.models.bundle import load_weights
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import NEW_LAYERS, AcousticRun, build_modules, load_model_init, run_config
from rtvox.training.checkpoint import load_module_state, save_snapshot


def compose(model_dir: Path, aligner_snapshot: Path, step: int, out: Path, preset: str = "small") -> dict[str, Any]:
    """Write the snapshot to `out`; returns its progress record. The model's config decides frame positions and the
    decoder's shape (a distilled default has fewer taps and no postnet: training.acoustic.DECODER_SHAPE)."""
    if step < 0:
        raise ValueError(f"--step must be >= 0, got {step}")
    shipped = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    frame_position = bool(shipped.get("acoustic", {}).get("frame_position", False))
    run = AcousticRun(data=Path("."), run_dir=Path("."), preset=preset, init=model_dir, frame_position=frame_position)
    vocab = Vocabulary.default()
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    progress: dict[str, Any] = {"step": step, "seconds": 0.0, "preset": preset, "frame_position": frame_position}
    progress.update(load_model_init(model_dir, modules, NEW_LAYERS))
    state = load_weights(aligner_snapshot, "aligner", torch.device("cpu"), torch.float32)
    load_module_state(modules["aligner"], state, "aligner", frozenset(), f"snapshot {aligner_snapshot}")
    progress["init_aligner"] = str(aligner_snapshot)
    save_snapshot(out, modules, progress)
    return progress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a shipped model directory (config.json inside)")
    parser.add_argument("--aligner", type=Path, required=True, help="a training snapshot with aligner weights")
    parser.add_argument("--step", type=int, default=0, help="the schedule step the run starts at")
    parser.add_argument("--preset", default="small", help="the acoustic preset the model was trained with")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(compose(args.model, args.aligner, args.step, args.out, args.preset)))


if __name__ == "__main__":
    main()
