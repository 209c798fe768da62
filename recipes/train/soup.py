"""Average two weight snapshots of the same model that share their start (a "weight soup"): every floating tensor
becomes (1 − w)·A + w·B, everything else is B's. rtvox-small 8.7.1 is the soup of 8.1.0's warm start for run T12
(A: .gpu/U4/init/acoustic) and T12's snapshot (B), w = 0.5 (recipes/train/README.md, "Run T12").

    .venv/bin/python -m recipes.train.soup --a .gpu/U4/init/acoustic --b /work/t12/snap/pack/acoustic \
        --out /work/t12/soup            # then `rtvox train export --acoustic /work/t12/soup ...`

Both snapshots must hold the same safetensors files with the same tensor names, shapes and dtypes (the trainer
writes a module's shards the same way for the same preset); progress.json is B's with a "soup" record added.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from safetensors.torch import save as save_safetensors

from rtvox.fsutil import atomic_write_bytes
from rtvox.training.checkpoint import PROGRESS_NAME as PROGRESS


def soup(a: Path, b: Path, out: Path, weight: float = 0.5) -> list[str]:
    """Write the soup of snapshot folders `a` and `b` to `out`; returns the weight files written."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"--weight must be in [0, 1], got {weight}")
    files = sorted(p.name for p in b.glob("*.safetensors"))
    if not files or files != sorted(p.name for p in a.glob("*.safetensors")):
        raise ValueError(f"{a} and {b} must hold the same safetensors files (found {files or 'none'} in {b})")
    out.mkdir(parents=True, exist_ok=True)
    for name in files:
        ta, tb = load_file(a / name), load_file(b / name)
        if ta.keys() != tb.keys():
            raise ValueError(f"{name}: the two snapshots name different tensors")
        mixed: dict[str, torch.Tensor] = {}
        for key, vb in tb.items():
            va = ta[key]
            if va.shape != vb.shape or va.dtype != vb.dtype:
                raise ValueError(f"{name}:{key}: {tuple(va.shape)} {va.dtype} against {tuple(vb.shape)} {vb.dtype}")
            mixed[key] = (
                (va.float() * (1 - weight) + vb.float() * weight).to(vb.dtype) if vb.is_floating_point() else vb
            )
        atomic_write_bytes(out / name, save_safetensors(mixed))  # a crash leaves no half-written shard
    progress = json.loads((b / PROGRESS).read_text(encoding="utf-8")) if (b / PROGRESS).is_file() else {}
    progress["soup"] = {"a": str(a), "b": str(b), "weight_of_b": weight}
    atomic_write_bytes(out / PROGRESS, json.dumps(progress, indent=1).encode("utf-8"))
    return files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path, required=True)
    p.add_argument("--b", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--weight", type=float, default=0.5, help="weight of B (default 0.5)")
    args = p.parse_args()
    try:
        files = soup(args.a, args.b, args.out, args.weight)
    except (ValueError, OSError) as e:
        raise SystemExit(f"soup: {e}") from e
    print(f"wrote {args.out}: {', '.join(files)}")


if __name__ == "__main__":
    main()
