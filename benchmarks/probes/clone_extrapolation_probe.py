"""Probe: does pushing a clone's speaker embedding away from the built-in voices move the cloning scores? CPU only.

    .venv/bin/python benchmarks/probes/clone_extrapolation_probe.py --model models/rtvox-small \
        --corpus /work/corpus-v3b --clone-refs /work/eval-voices --beta 0 --beta 0.5 --beta 1 \
        --out benchmarks/results/quality/v81/clone_extrapolation_probe.json

The cloning test of `rtvox eval --clone` (same references, 3 en + 3 zh dev sentences, GE2E cosine to the
reference clip's embedding e and closer-than-any-built-in), with one change: the model is conditioned on
normalize(e + beta * (e - anchor)), where anchor is either the nearest built-in voice (`nearest`) or the mean of
all built-in voices (`mean`). The score still compares the output with e itself. The model was trained on ~40
speakers and pulls an unseen voice toward the speakers it knows; extrapolating the condition away from them is the
speaker-space analogue of classifier-free guidance. Nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

# clone_timbre_probe sits beside this file (the probes run as scripts)
from clone_timbre_probe import add_cloning_args, cloning_setup, score_trial

from rtvox.runtime.synthesizer import Synthesizer


def push(emb: np.ndarray, table: np.ndarray, beta: float, anchor: str) -> np.ndarray:
    """normalize(emb + beta * (emb - anchor)) with anchor the nearest row of table or its mean."""
    ref = table[int(np.argmax(table @ emb))] if anchor == "nearest" else table.mean(0)
    out = emb + beta * (emb - ref)
    return (out / np.linalg.norm(out)).astype(np.float32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cloning_args(p)
    p.add_argument("--beta", type=float, action="append")
    p.add_argument("--anchor", action="append", choices=("nearest", "mean"))
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    refs, sentences, table = cloning_setup(synth, args.corpus, args.clone_refs)
    variants = [(a, b) for a in (args.anchor or ["nearest", "mean"]) for b in (args.beta or [0.0, 0.5, 1.0])]
    variants = list(dict.fromkeys((("none", 0.0) if b == 0 else (a, b)) for a, b in variants))
    scores: dict[str, dict[str, list[float]]] = {f"{a}:{b}": {"cosine": [], "closer": []} for a, b in variants}
    per_ref = []
    for ref in refs:
        emb = synth.embed_speaker(ref.wav_bytes())
        nearest = round(float(np.max(table @ emb)), 4)
        row: dict[str, object] = {"reference": ref.name, "ref_cos_nearest_builtin": nearest}
        for anchor, beta in variants:
            key = f"{anchor}:{beta}"
            cond = emb if beta == 0 else push(emb, table, beta, anchor)
            for text in sentences:
                cosine, closer = score_trial(synth, synth.synthesize(text, speaker_embedding=cond).audio, emb, table)
                scores[key]["cosine"].append(cosine)
                scores[key]["closer"].append(closer)
            row[key] = round(float(np.mean(scores[key]["cosine"][-len(sentences) :])), 4)
        per_ref.append(row)
        print(row, flush=True)
    summary = {
        k: {"mean_cosine": round(float(np.mean(s["cosine"])), 4), "closer_share": round(float(np.mean(s["closer"])), 4)}
        for k, s in scores.items()
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        result = {"model": args.model, "trials_per_variant": len(refs) * len(sentences)}
        result |= {"summary": summary, "per_reference": per_ref}
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
