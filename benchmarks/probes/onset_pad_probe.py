"""Probe: are sentence-initial syllables misheard because the audio starts too abruptly? CPU only.

    .venv/bin/python benchmarks/probes/onset_pad_probe.py --sets zh,zh=FILE --pad 0 --pad 0.15 --pad 0.3 \
        [--teacher-dir DIR] --out benchmarks/results/quality/t15/onset_pad_probe.json

Speaks each sentence once with the default voice (eager, CPU), measures the leading and trailing silence
(loudness.speech_bounds, so net of its margin: 0 means under the margin, as every clip of 2026-12-06 read), then
transcribes the same audio with `pad` seconds of silence put before it (Whisper
base, beam 5, as `rtvox eval`) and scores it. Errors are also split by position: the first two reference tokens
against the rest. `--teacher-dir` (wav files) adds the teacher's own leading silence for comparison.
Nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from rtvox.audio.loudness import speech_bounds
from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE, parse_sets
from rtvox.eval.metrics import normalize_for_scoring, primary_metric, score, tokens
from rtvox.runtime.synthesizer import Synthesizer


def head_errors(reference: str, hypothesis: str, n: int = 2) -> int:
    """1 when the first n reference tokens are not the hypothesis's first n tokens (a crude onset error)."""
    ref = tokens(normalize_for_scoring(reference))
    hyp = tokens(normalize_for_scoring(hypothesis))
    return int(ref[:n] != hyp[:n])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/rtvox-small")
    p.add_argument("--sets", default="zh")
    p.add_argument("--pad", type=float, action="append")
    p.add_argument("--teacher-dir", type=Path)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    judge = WhisperJudge()
    pads = args.pad or [0.0, 0.3]
    result: dict[str, object] = {"model": args.model, "pads": pads, "sets": {}}
    for sset in parse_sets(args.sets):
        metric = primary_metric(sset.lang)
        totals = {pad: [0, 0, 0] for pad in pads}  # errors, reference length, onset misses
        lead, trail = [], []
        for text in sset.sentences:
            audio = synth.synthesize(text).audio
            start, end = speech_bounds(audio, SAMPLE_RATE)
            lead.append(start / SAMPLE_RATE)
            trail.append((len(audio) - end) / SAMPLE_RATE)
            for pad in pads:
                padded = np.concatenate([np.zeros(int(pad * SAMPLE_RATE), np.float32), audio])
                hyp = judge.transcribe(padded, SAMPLE_RATE, ASR_LANGUAGE[sset.lang]).text
                counts = score(text, hyp, sset.lang)[metric]
                totals[pad][0] += counts.errors
                totals[pad][1] += counts.reference_length
                totals[pad][2] += head_errors(text, hyp)
        row: dict[str, object] = {
            "sentences": len(sset.sentences),
            "lead_s_median": round(float(np.median(lead)), 3),
            "trail_s_median": round(float(np.median(trail)), 3),
        }
        for pad, (err, length, onset) in totals.items():
            row[f"pad_{pad}"] = {"rate": round(err / max(length, 1), 4), "onset_misses": onset}
        print(sset.path, row, flush=True)
        result["sets"][str(sset.path)] = row  # type: ignore[index]
    if args.teacher_dir:
        leads = []
        for wav in sorted(args.teacher_dir.rglob("*.wav")):
            audio, sr = sf.read(wav, dtype="float32")
            leads.append(speech_bounds(audio, sr)[0] / sr)
        result["teacher_lead_s_median"] = round(float(np.median(leads)), 3) if leads else None
        print("teacher lead", result["teacher_lead_s_median"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
