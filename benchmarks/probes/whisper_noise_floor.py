"""How much Whisper's score moves for inaudible changes: the model's eager fp32 audio plus white noise at
1e-4 RMS (about -80 dBFS), scored like `rtvox eval` (same sentences, same judge), per voice and language.

    .venv/bin/python benchmarks/probes/whisper_noise_floor.py \
        --out benchmarks/results/quality/auto-vs-eager/eager-plus-noise.json

Compare with the same voices' plain `rtvox eval` results: the difference is the judge's noise floor, the
yardstick for "within 0.5 points of eager" (docs/QUALITY.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import evaluate_set, parse_sets
from rtvox.runtime.synthesizer import Synthesizer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--voices", default="mei,jun,joe,sally")
    parser.add_argument("--noise-rms", type=float, default=1e-4)
    args = parser.parse_args()
    synth = Synthesizer(args.model, device="cpu")
    judge = WhisperJudge(threads=2)
    results: dict[str, dict[str, float]] = {}
    for voice in args.voices.split(","):
        rng = np.random.default_rng(0)

        def render(lang: str, text: str, voice: str = voice, rng: np.random.Generator = rng) -> tuple[np.ndarray, int]:
            audio = synth.synthesize(text, voice=voice).audio
            return audio + rng.normal(0.0, args.noise_rms, audio.shape).astype(np.float32), SAMPLE_RATE

        for sentence_set in parse_sets("en,zh"):
            summary = evaluate_set(sentence_set, render, judge)["summary"]
            metric = summary["metrics"]["wer" if sentence_set.lang == "en" else "cer"]
            results[f"{voice}-{sentence_set.lang}"] = {k: metric[k] for k in ("errors", "reference_length", "rate")}
            print(voice, sentence_set.lang, metric["rate"], flush=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
