"""Is the model weak on speech, or on text it has not met? Whisper error rates on sentences of the training corpus
(its `train` split: texts the model was trained on) and of its `val`/held-out splits (texts it was not), beside
the dev-set figure `rtvox eval` gives; plus how many of a sentence file's Mandarin syllables the corpus covers.

    .venv/bin/python -m recipes.train.corpus_gap --corpus /work/corpus8 --dev-zh ../shared/eval/sentences_zh.txt
"""

from __future__ import annotations

import argparse
import collections
import json
import random
from pathlib import Path

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.metrics import ErrorCounts, primary_metric, score
from rtvox.runtime import Synthesizer


def _syllables(text: str) -> list[str]:
    from pypinyin import Style, lazy_pinyin

    return [s for s in lazy_pinyin(text, style=Style.TONE3, neutral_tone_with_five=True) if s[-1:].isdigit()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a corpus folder with manifest.jsonl")
    parser.add_argument("--model", default="rtvox-small")
    parser.add_argument("--n", type=int, default=12, help="sentences per language and side")
    parser.add_argument("--dev-zh", type=Path, default=None, help="a Mandarin sentence file for the coverage count")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows = [json.loads(line) for line in (args.corpus / "manifest.jsonl").read_text("utf-8").splitlines() if line]
    rng = random.Random(args.seed)
    synth = Synthesizer(args.model, device="cpu")
    asr = WhisperJudge()
    report: dict[str, object] = {"model": str(synth.model_dir), "corpus": str(args.corpus)}
    for lang in ("en", "zh"):
        trained = {r["spoken"] for r in rows if r["split"] == "train" and r["lang"] == lang}
        unseen = {r["spoken"] for r in rows if r["split"] != "train" and r["lang"] == lang} - trained
        for side, texts in (("trained", trained), ("unseen", unseen)):
            picked = rng.sample(sorted(texts), min(args.n, len(texts)))
            total = ErrorCounts()
            for text in picked:
                heard = asr.transcribe(synth.synthesize(text).audio, SAMPLE_RATE, language=lang).text
                total = total + score(text, heard, lang)[primary_metric(lang)]
            report[f"{lang}_{side}"] = {"sentences": len(picked), primary_metric(lang): round(total.rate, 4)}
            print(lang, side, report[f"{lang}_{side}"], flush=True)
    if args.dev_zh is not None:
        counts = collections.Counter(
            s for r in rows if r["split"] == "train" and r["lang"] in ("zh", "mixed") for s in _syllables(r["spoken"])
        )
        dev = [s for line in args.dev_zh.read_text("utf-8").splitlines() if line.strip() for s in _syllables(line)]
        report["dev_zh_syllables"] = {
            "total": len(dev),
            "not_in_corpus": sum(counts[s] == 0 for s in dev),
            "under_5_in_corpus": sum(0 < counts[s] < 5 for s in dev),
            "corpus_distinct_tonal_syllables": len(counts),
        }
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
