"""Probe: are emotions recognized in cloned voices too (voices outside the training data)? CPU only.

    .venv/bin/python benchmarks/probes/emotion_clone_probe.py --model models/rtvox-small \
        --clone-refs /work/eval-voices --out benchmarks/results/quality/v86/emotion_clones.json

`rtvox eval --emotion` judges two built-in voices. Here every clip of `--clone-refs` becomes a cloned voice
(the same path as `POST /v1/audio/voices`), and each clone speaks the eval's emotion sentences (`--sets`, first
`--limit` per language) neutrally and in the five basic emotions; the held-out prosody judge scores them as in
the eval (relative to that clone's own neutral renderings). No ASR: recognition only. Measurement only.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from rtvox.eval.emotion_judge import EmotionJudge
from rtvox.eval.expressive import evaluate_emotion
from rtvox.eval.intelligibility import parse_sets
from rtvox.eval.runner import EMOTION_SENTENCES, _by_lang
from rtvox.runtime.synthesizer import Synthesizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, action="append", required=True, help="repeatable: compared side by side")
    p.add_argument("--clone-refs", type=Path, required=True, help="folder of reference .wav clips")
    p.add_argument("--sets", default="en,zh")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(2)
    refs = sorted(args.clone_refs.glob("*.wav"))
    if not refs:
        raise SystemExit(f"no .wav clips in {args.clone_refs}")
    judge = EmotionJudge.load(None)
    material = _by_lang(parse_sets(args.sets, None, args.limit), EMOTION_SENTENCES)
    report: dict[str, dict[str, object]] = {}
    for model in args.model:
        with tempfile.TemporaryDirectory() as clones:
            synth = Synthesizer(model, device="cpu", voices_dir=Path(clones))
            ids = [synth.clone_voice(ref.stem, ref).name for ref in refs]
            result = evaluate_emotion(synth, judge, material, voices=ids)
        result.pop("items")
        report[str(model)] = result
        print(model, result["accuracy"], result["per_emotion_accuracy"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"refs": [r.name for r in refs], "results": report}, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
