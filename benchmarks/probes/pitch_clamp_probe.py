"""Probe: does bounding the rendered pitch (speaker z-scores fed to the decoder's pitch embedding) give back the
words an emotion's prosody prior costs? CPU, Whisper base, first N English dev sentences.

    .venv/bin/python benchmarks/probes/pitch_clamp_probe.py [--model models/rtvox-small] --limit 2.5 [--limit 4]

Per emotion (neutral, happy, angry, surprised): the 1st/50th/99th percentile and maximum of the phoneme pitch
values the decoder receives without a bound, then per limit the Whisper-base word errors with the pitch clamped
to [-limit, limit]. The clamp is monkeypatched onto the loaded model for this probe only; nothing ships with it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.metrics import score
from rtvox.runtime.synthesizer import Synthesizer

ROOT = Path(__file__).resolve().parents[2]
EMOTIONS = ("neutral", "happy", "angry", "surprised")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=ROOT / "models" / "rtvox-small")
    p.add_argument("--voice", default="mei")
    p.add_argument("--sentences", type=int, default=6)
    p.add_argument("--limit", type=float, action="append", default=None)
    args = p.parse_args()
    eval_dir = next(d for d in (ROOT / "shared" / "eval", ROOT.parent / "shared" / "eval") if d.is_dir())
    lines = (eval_dir / "sentences_en.txt").read_text("utf-8").splitlines()
    texts = [ln.strip() for ln in lines if ln.strip()][: args.sentences]
    synth = Synthesizer(args.model, device="cpu", backend="eager")
    embed = next(m for name, m in synth.bundle.acoustic.named_modules() if name.endswith("pitch_embed"))
    unbounded = embed.forward
    seen: list[np.ndarray] = []
    bound: list[float | None] = [None]

    def forward(value: torch.Tensor, mask: torch.Tensor) -> Any:
        seen.append(value[mask].detach().float().numpy())
        limit = bound[0]
        return unbounded(value if limit is None else value.clamp(-limit, limit), mask)

    embed.forward = forward  # type: ignore[method-assign]
    for emotion in EMOTIONS:
        seen.clear()
        for text in texts:
            synth.synthesize(text, voice=args.voice, emotion=emotion)
        v = np.concatenate(seen)
        p1, p50, p99 = np.percentile(v, [1, 50, 99])
        print(f"{emotion}: pitch z p1 {p1:.2f} p50 {p50:.2f} p99 {p99:.2f} max {v.max():.2f}", flush=True)
    asr = WhisperJudge(threads=2)
    for limit in args.limit or [2.5]:
        bound[0] = limit
        for emotion in EMOTIONS:
            errors = words = 0
            for text in texts:
                audio = synth.synthesize(text, voice=args.voice, emotion=emotion).audio
                counts = score(text, asr.transcribe(audio, SAMPLE_RATE, "en").text, "en")["wer"]
                errors, words = errors + counts.errors, words + counts.reference_length
            print(f"limit {limit}: {emotion} {errors} / {words} word errors", flush=True)


if __name__ == "__main__":
    main()
