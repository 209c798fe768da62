"""How much intelligibility a model's vocoder costs: Whisper on held-out corpus clips as recorded, and on the same
clips' log-mels put back through the model's vocoder (copy synthesis).

The clips are the corpus's neutral utterances of the `val` / `heldout-teacher` splits (never trained on), so the
only difference between the two columns is the vocoder. Run it on a candidate vocoder before exporting it.

    .venv/bin/python -m recipes.train.vocoder_check --model models/rtvox-small --corpus /work/corpus8 --limit 10
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from rtvox.audio.mel import MelSpectrogram
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE
from rtvox.eval.metrics import ErrorCounts, primary_metric, score
from rtvox.models.ar_bundle import load_bundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an exported model directory")
    parser.add_argument("--corpus", type=Path, required=True, help="a corpus directory (manifest.jsonl inside)")
    parser.add_argument("--langs", default="en,zh", help="comma-separated: en, zh, mixed")
    parser.add_argument("--limit", type=int, default=10, help="clips per language")
    args = parser.parse_args()

    bundle = load_bundle(args.model, device=torch.device("cpu"), dtype=torch.float32)
    mel_of = MelSpectrogram()
    asr = WhisperJudge()
    rows = [json.loads(line) for line in (args.corpus / "manifest.jsonl").read_text("utf-8").splitlines()]
    held = [r for r in rows if r["split"] != "train" and r["emotion"] == "neutral"]
    report: dict[str, object] = {"model": str(args.model), "corpus": str(args.corpus)}
    for lang in args.langs.split(","):
        picked = [r for r in held if r["lang"] == lang][: args.limit]
        if not picked:
            raise SystemExit(f"{args.corpus}: no held-out neutral {lang} clips")
        metric = primary_metric(lang)
        totals = {"recorded": ErrorCounts(), "vocoded": ErrorCounts()}
        for row in picked:
            wav, sr = sf.read(args.corpus / row["path"], dtype="float32")
            with torch.no_grad():
                vocoded = bundle.vocoder(mel_of(torch.from_numpy(np.ascontiguousarray(wav))[None]))[0].numpy()
            for name, clip in (("recorded", wav), ("vocoded", vocoded)):
                heard = asr.transcribe(clip, sr, language=ASR_LANGUAGE[lang]).text
                totals[name] = totals[name] + score(row["spoken"], heard, lang)[metric]
        report[lang] = {"clips": len(picked), "metric": metric} | {k: round(v.rate, 4) for k, v in totals.items()}
        print(json.dumps({lang: report[lang]}), flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
