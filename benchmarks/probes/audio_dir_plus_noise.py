"""The judge's noise floor on clips rendered elsewhere: a copy of an `rtvox eval --audio-dir` folder (manifest.jsonl
+ clips) with white noise at 1e-4 RMS (about -80 dBFS, inaudible) added to every clip, to score beside the
original (docs/QUALITY.md, "On the GPU: the PipelineEngine against eager fp32 on the shipped 8.10.0").

    .venv/bin/python benchmarks/probes/audio_dir_plus_noise.py eager-mei eager-mei-noise1 --seed 100
    .venv/bin/rtvox eval --audio-dir eager-mei-noise1 --sets en,zh
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import soundfile as sf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("src", type=Path, help="folder with manifest.jsonl and its clips")
    parser.add_argument("dst", type=Path, help="new folder (must not exist)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-rms", type=float, default=1e-4)
    args = parser.parse_args()
    args.dst.mkdir(parents=True)
    rng = np.random.default_rng(args.seed)
    lines = []
    for line in (args.src / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        name = Path(item["path"]).name
        wav, sr = sf.read(args.src / name, dtype="float32")
        wav = wav + rng.normal(0.0, args.noise_rms, wav.shape).astype(np.float32)
        sf.write(args.dst / name, wav, sr, subtype="PCM_16")
        lines.append(json.dumps({**item, "path": name}, ensure_ascii=False))
    (args.dst / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
