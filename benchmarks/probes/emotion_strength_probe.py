"""Probe: per-emotion strength and the learned emotion row — what do they do to recognition and to words? CPU.

    .venv/bin/python benchmarks/probes/emotion_strength_probe.py \
        --sets en=benchmarks/results/quality/v87/emotion-wide/sentences_en.txt,zh=... --sentences 30 \
        --variant shipped --variant angry=1.3 --variant norow [--asr] --out FILE.json

The eval's emotion test (`rtvox eval --emotion`: voices mei + jun, the held-out prosody judge relative to each
voice's neutral renderings, Whisper on mei's with `--asr`) on the first `--sentences` of each language, once per
variant. A variant is `shipped`; `EMOTION=ALPHA[,EMOTION=ALPHA...]` (those labels requested at that strength
instead of 1: the prior, the speaker shift and the learned emotion row all scale with it); or `norow` (label
requests conditioned with the neutral label's learned row: only the speaker shift and the prior carry the emotion).
Measurement only; nothing in the product changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from rtvox.eval.asr import WhisperJudge
from rtvox.eval.emotion_judge import EmotionJudge
from rtvox.eval.expressive import evaluate_emotion
from rtvox.eval.intelligibility import parse_sets
from rtvox.eval.runner import _by_lang, _other_gender_voice
from rtvox.runtime.synthesizer import Synthesizer


def strengths(variant: str) -> dict[str, float]:
    if variant in ("shipped", "norow"):
        return {}
    out = {}
    for item in variant.split(","):
        label, _, value = item.partition("=")
        out[label.strip()] = float(value)
    return out


def run_variant(synth: Synthesizer, variant: str, judge: EmotionJudge, material: Any, asr: Any) -> dict[str, Any]:
    alphas = strengths(variant)
    plain = synth.synthesize
    table = synth.bundle.emotion_table

    def synthesize(text: str, **kwargs: Any) -> Any:
        emotion = kwargs.get("emotion")
        if emotion in alphas:
            kwargs["emotion_alpha"] = alphas[emotion]
        return plain(text, **kwargs)

    def neutral_row(index: torch.Tensor) -> torch.Tensor:
        return table(torch.zeros_like(index))  # EMOTIONS[0] is neutral

    synth.synthesize = synthesize  # type: ignore[method-assign]
    if variant == "norow":
        synth.bundle.emotion_table = neutral_row  # type: ignore[assignment]
    synth._cond_cache.clear()
    try:
        voices = _other_gender_voice(synth, synth.default_voice)
        return evaluate_emotion(synth, judge, material, voices=voices, asr=asr)
    finally:
        synth.synthesize = plain  # type: ignore[method-assign]
        synth.bundle.emotion_table = table  # type: ignore[assignment]
        synth._cond_cache.clear()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--sets", default="en,zh")
    p.add_argument("--sentences", type=int, default=30, help="per language")
    p.add_argument("--skip", type=int, default=0, help="leave out the first N of each language (a validation half)")
    p.add_argument("--variant", action="append", required=True)
    p.add_argument("--asr", action="store_true", help="Whisper on the first voice (error rate by emotion)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    judge = EmotionJudge.load(None)
    asr = WhisperJudge(threads=2) if args.asr else None
    material = {
        k: v[args.skip :] for k, v in _by_lang(parse_sets(args.sets, None, None), args.skip + args.sentences).items()
    }
    report: dict[str, Any] = {"sets": args.sets, "skip": args.skip, "sentences_per_language": args.sentences}
    report["variants"] = {}
    for variant in args.variant:
        result = run_variant(synth, variant, judge, material, asr)
        result.pop("items")
        result.pop("error_counts_by_sentence", None)
        report["variants"][variant] = result
        summary = {k: result.get(k) for k in ("accuracy", "per_emotion_accuracy", "error_rate_delta_vs_neutral")}
        print(variant, json.dumps(summary), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
