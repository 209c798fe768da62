"""Whisper error of an AR model's duration-controlled speech: each sentence at its free length, then at 0.7x and
1.4x of it (`rtvox eval --duration` measures only the lengths; this asks whether the text is still all there).

    .venv/bin/python benchmarks/probes/ar_duration_wer.py /work/rtvox-arq ../shared/eval/sentences_en.txt 10 en
"""

from __future__ import annotations

import json
import sys

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE
from rtvox.eval.metrics import ErrorCounts, primary_metric, score
from rtvox.runtime import Synthesizer

FACTORS = (0.7, 1.4)


def main(model: str, sentences: str, limit: int, lang: str) -> dict[str, float]:
    synth = Synthesizer(model, device="cpu")
    judge = WhisperJudge()
    metric = primary_metric(lang)
    with open(sentences, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][:limit]
    totals = {name: ErrorCounts() for name in ("free", *map(str, FACTORS))}
    for text in lines:
        free = synth.synthesize(text, seed=0)
        for name in totals:
            audio = (
                free.audio
                if name == "free"
                else synth.synthesize(text, seed=0, duration=float(name) * free.seconds).audio
            )
            heard = judge.transcribe(audio, SAMPLE_RATE, language=ASR_LANGUAGE[lang]).text
            totals[name] = totals[name] + score(text, heard, lang)[metric]
    return {name: round(counts.rate, 4) for name, counts in totals.items()}


if __name__ == "__main__":
    model, sentences, limit, lang = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    print(json.dumps({"model": model, "sentences": limit, "lang": lang, **main(model, sentences, limit, lang)}))
