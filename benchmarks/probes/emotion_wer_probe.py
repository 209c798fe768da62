"""Probe: which knob of the emotion prosody prior costs intelligibility (CPU, Whisper base).

Renders the first N dev English sentences (shared/eval/sentences_en.txt) with one voice and one emotion, with
the model's prior as shipped and with knob overrides, and prints each variant's Whisper-base word errors.

    .venv/bin/python benchmarks/probes/emotion_wer_probe.py models/rtvox-small --emotion surprised \
        --variant shipped --variant identity --variant pitch_shift --variant pitch_range --variant energy_shift,tilt

A variant names the knobs kept from the shipped prior (`shipped`: all, `identity`: none); the others are set to
the identity (pitch_shift 0, pitch_range 1, energy_shift 0, duration 1, tilt 0). Each variant is a copy of the
model folder with config.json's `emotion_prosody[emotion]` rewritten, in a temp dir.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.metrics import score
from rtvox.runtime.synthesizer import Synthesizer

IDENTITY = {"pitch_shift": 0.0, "pitch_range": 1.0, "energy_shift": 0.0, "duration": 1.0, "tilt": 0.0}
ROOT = Path(__file__).resolve().parents[2]


def variant_model(model: Path, emotion: str, keep: set[str], work: Path) -> Path:
    out = work / ("-".join(sorted(keep)) or "identity")
    shutil.copytree(model, out)
    config = json.loads((out / "config.json").read_text("utf-8"))
    knobs = config["emotion_prosody"][emotion]
    config["emotion_prosody"][emotion] = {k: (v if k in keep else IDENTITY[k]) for k, v in knobs.items()}
    (out / "config.json").write_text(json.dumps(config, indent=1), "utf-8")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("--emotion", default="surprised")
    p.add_argument("--voice", default="mei")
    p.add_argument("--sentences", type=int, default=6)
    p.add_argument("--variant", action="append", default=None)
    args = p.parse_args()
    eval_dir = next(d for d in (ROOT / "shared" / "eval", ROOT.parent / "shared" / "eval") if d.is_dir())
    texts = [ln.strip() for ln in (eval_dir / "sentences_en.txt").read_text("utf-8").splitlines() if ln.strip()]
    texts = texts[: args.sentences]
    asr = WhisperJudge(threads=2)
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.variant or ["shipped", "identity"]:
            keep = set(IDENTITY) if name == "shipped" else set() if name == "identity" else set(name.split(","))
            synth = Synthesizer(variant_model(args.model, args.emotion, keep, Path(tmp)), device="cpu")
            errors = words = 0
            misheard = []
            for text in texts:
                audio = synth.synthesize(text, voice=args.voice, emotion=args.emotion).audio
                heard = asr.transcribe(audio, SAMPLE_RATE, "en").text
                counts = score(text, heard, "en")["wer"]
                errors, words = errors + counts.errors, words + counts.reference_length
                if counts.errors:
                    misheard.append(heard)
            report[name] = {"errors": errors, "words": words, "misheard": misheard}
            print(name, errors, "/", words, misheard, flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
