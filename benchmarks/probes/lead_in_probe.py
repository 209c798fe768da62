"""Probe: does a throw-away lead-in (a short word and a pause, spoken before each chunk and cut off its audio) give
the chunk's real first phoneme its sound back? CPU only.

    .venv/bin/python benchmarks/probes/lead_in_probe.py --sets zh,en,zh=FILE --lead none --lead 'zh=嗯，;en=Well,' \
        --keep 0 --out benchmarks/results/quality/lead-in/probe.json

The model renders a chunk's first phoneme as lead-in silence (docs/QUALITY.md, "A chunk that starts with a vowel").
Here every chunk is spoken as LEAD + chunk (the lead's phonemes as config `lead_in` makes them, in the chunk's
language) and the audio of the lead's frames is cut off, keeping the last `keep` frames of its closing pause (at
most the pause's own; config `lead_in` keeps none). The zero-initial texts of zero_initial_probe.py report the
first content phoneme's level; the sets are scored with Whisper base (beam 5, 0.33 s of silence each side, as
`rtvox eval`). Figures: docs/QUALITY.md, "A lead-in". Nothing ships with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
from zero_initial_probe import TEXTS, hear  # the texts and the hearing as measured there

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE, parse_sets
from rtvox.eval.metrics import primary_metric, score
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.synthesizer import Synthesizer, lead_in_phonemes
from rtvox.runtime.types import SynthesisRequest
from rtvox.text.result import FrontendResult


def lead_phonemes(synth: Synthesizer, spec: str) -> dict[str, tuple[str, ...]]:
    """'zh=嗯，;en=Well,' -> the phonemes of each language's lead-in, as config `lead_in` makes them."""
    if spec == "none":
        return {}
    pairs = (part.split("=", 1) for part in spec.split(";"))
    return {lang: tuple(lead_in_phonemes(synth.frontend, lang, text)) for lang, text in pairs}


def chunk_lang(phonemes: tuple[str, ...]) -> str:
    for p in phonemes:
        if p.startswith("zh:"):
            return "zh"
        if p.startswith("en:"):
            return "en"
    return "en"


def speak(synth: Synthesizer, text: str, leads: dict[str, tuple[str, ...]], keep: int) -> tuple[np.ndarray, float]:
    """(audio, level of the first content phoneme in dBFS)"""
    front = synth.frontend.process(text)
    cut: list[int] = []
    chunks = []
    for c in front.chunks:
        lead = leads.get(chunk_lang(c.phonemes), ())
        cut.append(len(lead))
        chunks.append(dataclasses.replace(c, phonemes=lead + tuple(c.phonemes)))
    front2: FrontendResult = dataclasses.replace(front, chunks=tuple(chunks))
    prepared = synth.prepare(SynthesisRequest(text=text), front2)
    parts = []
    first_db = float("nan")
    for i in range(len(prepared.chunks)):
        (out,) = synth.run_step([ChunkJob(prepared, i)])
        d = list(out.durations)
        n = cut[i]
        lead_frames = sum(d[:n])
        # keep at most the closing pause's own frames, so nothing of the lead word's sound stays
        start = lead_frames - min(keep, d[n - 1]) if n else 0
        wav = out.audio[start * HOP_LENGTH :]
        if i == 0:
            spoken = [(k, x) for k, x in enumerate(d) if k >= n and x > 0]
            if spoken:
                k0, frames = spoken[0]
                a = sum(d[:k0]) - start
                span = wav[a * HOP_LENGTH : (a + frames) * HOP_LENGTH]
                first_db = float(20 * np.log10(np.sqrt(np.mean(span**2)) + 1e-9))
        parts.append(wav)
    return np.concatenate(parts), first_db


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/rtvox-small")
    p.add_argument("--sets", default="zh,en")
    p.add_argument("--lead", action="append", help="'none' or 'zh=TEXT;en=TEXT'")
    p.add_argument("--keep", type=int, default=4)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    judge = WhisperJudge()
    result: dict[str, object] = {"model": args.model, "keep": args.keep, "leads": {}}
    for spec in args.lead or ["none"]:
        leads = lead_phonemes(synth, spec)
        t0 = time.time()
        rows = []
        for text, lang in TEXTS:
            wav, db = speak(synth, text, leads, args.keep)
            rows.append({"text": text, "first_dbfs": round(db, 1), "heard": hear(judge, wav, lang)})
        sets = {}
        transcripts: dict[str, list[dict[str, object]]] = {}
        for sset in parse_sets(args.sets):
            metric = primary_metric(sset.lang)
            err = length = 0
            heard = []
            for text in sset.sentences:
                wav, _ = speak(synth, text, leads, args.keep)
                pad = np.zeros(SAMPLE_RATE // 3, np.float32)
                hyp = judge.transcribe(np.concatenate([pad, wav, pad]), SAMPLE_RATE, ASR_LANGUAGE[sset.lang]).text
                counts = score(text, hyp, sset.lang)[metric]
                heard.append({"text": text, "heard": hyp, "errors": counts.errors})
                err += counts.errors
                length += counts.reference_length
            sets[str(sset.path)] = round(err / max(length, 1), 4)
            transcripts[str(sset.path)] = heard
        entry = {"zero_initial": rows, "sets": sets, "transcripts": transcripts, "seconds": round(time.time() - t0)}
        print(spec, json.dumps(sets), flush=True)
        for r in rows:
            print("  ", json.dumps(r, ensure_ascii=False), flush=True)
        result["leads"][spec] = entry  # type: ignore[index]
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
