"""Render sentence files with one model through several backends and voices, for scoring elsewhere: issue 4's
"Whisper WER/CER within 0.5 points of eager's" for a GPU engine, whose machine has no Whisper. Each
(backend, voice) pair becomes a folder DIR/<backend>-<voice>/ of FLAC clips + manifest.jsonl ({set, text, path}),
the layout `rtvox eval --audio-dir` scores, packed as DIR/<backend>-<voice>.tar.

    python3 benchmarks/probes/gpu_render_sets.py $OUT --model models/rtvox-small --backends eager,graphs \
        --voices mei,joe --sets en=PATH,zh=PATH
    # then, where Whisper is: tar xf <backend>-<voice>.tar; rtvox eval --audio-dir <backend>-<voice> --sets en,zh
"""

from __future__ import annotations

import argparse
import json
import tarfile
import time
from pathlib import Path

import soundfile as sf

from rtvox.audio.decode import resample
from rtvox.constants import SAMPLE_RATE
from rtvox.runtime.synthesizer import Synthesizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--model", default="models/rtvox-small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backends", default="eager,graphs")
    p.add_argument("--voices", default="mei")
    p.add_argument("--sets", required=True, help="comma-separated SET=FILE (one sentence per line)")
    p.add_argument(
        "--sample-rate",
        type=int,
        default=SAMPLE_RATE,
        help="rate of the written clips (16000: Whisper's own input rate, two thirds of the bytes to bring back)",
    )
    args = p.parse_args()
    sets = {}
    for item in args.sets.split(","):
        name, _, path = item.partition("=")
        sets[name] = [ln.strip() for ln in Path(path).read_text("utf-8").splitlines() if ln.strip()]
    for backend in args.backends.split(","):
        t0 = time.perf_counter()
        synth = Synthesizer(args.model, device=args.device, backend=backend)
        print(f"{backend}: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        for voice in args.voices.split(","):
            folder = args.out / f"{backend}-{voice}"
            folder.mkdir(parents=True, exist_ok=True)
            rows = []
            t0 = time.perf_counter()
            for name, texts in sets.items():
                for i, text in enumerate(texts):
                    audio = synth.synthesize(text, voice=voice).audio
                    if args.sample_rate != SAMPLE_RATE:
                        audio = resample(audio, SAMPLE_RATE, args.sample_rate)
                    path = f"{name}-{i:03d}.flac"
                    sf.write(folder / path, audio, args.sample_rate, subtype="PCM_16")
                    rows.append({"set": name, "text": text, "path": path})
            (folder / "manifest.jsonl").write_text(
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
            )
            with tarfile.open(args.out / f"{backend}-{voice}.tar", "w") as tar:
                tar.add(folder, arcname=folder.name)
            print(f"{backend} {voice}: {len(rows)} clips in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
