"""Probe: where do the model's emotional renderings sit against the teachers' in the judge's own feature space?
CPU only.

    .venv/bin/python benchmarks/probes/emotion_feature_gap.py --corpus /work/corpus-v3b --alpha 1 --alpha 1.5 \
        --out benchmarks/results/quality/v81/emotion_feature_gap.json

Teacher side: a seeded sample of the corpus's clips (8 neutral and 6 of each other emotion per speaker, training
speakers only), the judge's prosody features relative to each speaker's neutral mean
(rtvox.eval.judge_data). Model side: the eval's emotion measurement without Whisper — the first six en and six
zh dev sentences, voices mei and jun, each emotion's features relative to the same voice's neutral renderings of
the same sentences — once per `--alpha` (the request's emotion strength; 1 is what `rtvox eval` measures). For
each emotion: the mean relative feature vector of both sides and what the judge calls the model's clips.
Measurement only; nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.emotion_judge import BASIC_EMOTIONS, EmotionJudge
from rtvox.eval.judge_data import HELDOUT_SPLIT, extract_corpus_features
from rtvox.eval.prosody import FEATURES, ProsodyExtractor, relative
from rtvox.runtime.synthesizer import Synthesizer

ROOT = Path(__file__).resolve().parents[2]


def teacher_side(corpus: Path, judge: EmotionJudge) -> dict[str, Any]:
    feats = extract_corpus_features(corpus, max_neutral=8, max_other=6, jobs=2)
    rel = feats.relative_features()
    keep = np.array([s != HELDOUT_SPLIT for s in feats.splits])
    out = {}
    for emotion in BASIC_EMOTIONS:
        rows = rel[keep & np.array([e == emotion for e in feats.emotions])]
        predicted = judge.predict(rows, BASIC_EMOTIONS)
        out[emotion] = {
            "clips": int(rows.shape[0]),
            "mean": dict(zip(FEATURES, np.round(rows.mean(0), 4).tolist(), strict=True)),
            "judged_right": round(float(np.mean([p == emotion for p in predicted])), 4),
        }
    return out


def model_side(synth: Synthesizer, judge: EmotionJudge, alpha: float, voices: list[str]) -> dict[str, Any]:
    eval_dir = ROOT.parent / "shared" / "eval"
    sentences = {
        lang: [s for s in (eval_dir / f"sentences_{lang}.txt").read_text("utf-8").splitlines() if s.strip()][:6]
        for lang in ("en", "zh")
    }
    extract = ProsodyExtractor()
    rows: dict[str, list[np.ndarray]] = defaultdict(list)
    for voice in voices:
        for texts in sentences.values():
            absolute: dict[str, list[np.ndarray]] = defaultdict(list)
            for text in texts:
                for emotion in BASIC_EMOTIONS:
                    audio = synth.synthesize(text, voice=voice, emotion=emotion, emotion_alpha=alpha).audio
                    absolute[emotion].append(extract(audio, SAMPLE_RATE, text))
            baseline = np.mean(absolute["neutral"], axis=0)
            for emotion in BASIC_EMOTIONS:
                rows[emotion].append(relative(np.stack(absolute[emotion]), baseline))
    out = {}
    for emotion in BASIC_EMOTIONS:
        stacked = np.concatenate(rows[emotion])
        predicted = judge.predict(stacked, BASIC_EMOTIONS)
        out[emotion] = {
            "clips": int(stacked.shape[0]),
            "mean": dict(zip(FEATURES, np.round(stacked.mean(0), 4).tolist(), strict=True)),
            "judged_as": dict(Counter(predicted)),
        }
    out["accuracy"] = round(
        float(np.mean([out[e]["judged_as"].get(e, 0) / out[e]["clips"] for e in BASIC_EMOTIONS])), 4
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/rtvox-small")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--voices", default="mei,jun")
    p.add_argument("--alpha", type=float, action="append")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    judge = EmotionJudge.load()
    teacher = teacher_side(args.corpus, judge)
    synth = Synthesizer(args.model, device="cpu")
    voices = args.voices.split(",")
    models = {str(a): model_side(synth, judge, a, voices) for a in (args.alpha or [1.0])}
    print("feature".ljust(18) + "".join(f"{e:>24}" for e in BASIC_EMOTIONS))
    print(" " * 18 + "".join(f"{'teacher':>12}{'model a=1':>12}" for _ in BASIC_EMOTIONS))
    first = next(iter(models.values()))
    for f in FEATURES:
        cells = "".join(f"{teacher[e]['mean'][f]:12.3f}{first[e]['mean'][f]:12.3f}" for e in BASIC_EMOTIONS)
        print(f.ljust(18) + cells)
    for alpha, side in models.items():
        print(f"alpha {alpha}: accuracy {side['accuracy']}", {e: side[e]["judged_as"] for e in BASIC_EMOTIONS})
    if args.out:
        result = {"model": args.model, "corpus": str(args.corpus), "voices": voices, "teacher": teacher}
        result["model_by_alpha"] = models
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
