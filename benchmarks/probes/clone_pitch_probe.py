"""Probe: does moving a clone's pitch level to its reference's move the cloning scores? CPU only.

    .venv/bin/python benchmarks/probes/clone_pitch_probe.py --corpus /work/corpus-ho --clone-refs /work/eval-voices \
        --gain 0 --gain 0.5 --gain 1 --out benchmarks/results/quality/t15/clone_pitch_probe.json

The cloning test of `rtvox eval --clone` (same references and sentences as clone_timbre_probe.py), with one change:
the acoustic model's prosody row gets a pitch shift (speaker z-units, the input the emotion prior already uses) so
that the median F0 of the clone's speech lands on the reference clip's. The shift is calibrated per reference on
four sentences that are not eval sentences: median log-F0 of the renderings at shift 0 and at shift 1 gives the
slope, s = (log F0_ref - m0) / (m1 - m0), clamped to ±3; `--gain` scales it (0 = the shipped behaviour).
Nothing ships with it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch
from clone_timbre_probe import CALIBRATION, add_cloning_args, cloning_setup, report, score_variant

from rtvox.audio.loudness import trim_silence
from rtvox.audio.pitch import frame_f0
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.runtime.synthesizer import Synthesizer

_shift = {"s": 0.0}


def median_log_f0(audio: np.ndarray) -> float:
    """Median log-F0 over the voiced frames of the trimmed clip (nan when nothing is voiced)."""
    speech = trim_silence(audio, SAMPLE_RATE)
    f0 = frame_f0(speech, len(speech) // HOP_LENGTH)
    voiced = f0[f0 > 0]
    return float(np.median(np.log(voiced))) if voiced.size else float("nan")


def patch_prosody(synth: Synthesizer) -> None:
    """Add the probe's pitch shift to every request's prosody row."""
    original = synth.emotion_prosody

    def shifted(request: Any) -> Any:
        row, tilt = original(request)
        return (row[0] + _shift["s"], row[1], row[2], row[3]), tilt

    synth.emotion_prosody = shifted  # type: ignore[method-assign]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cloning_args(p)
    p.add_argument("--gain", type=float, action="append")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    patch_prosody(synth)
    refs, sentences, table = cloning_setup(synth, args.corpus, args.clone_refs)
    gains = args.gain or [0.0, 1.0]
    scores: dict[float, dict[str, list[float]]] = {g: {"cosine": [], "closer": []} for g in gains}
    per_ref = []
    for ref in refs:
        emb = synth.embed_speaker(ref.wav_bytes())
        level = {}
        for s in (0.0, 1.0):
            _shift["s"] = s
            level[s] = float(
                np.nanmedian([median_log_f0(synth.synthesize(t, speaker_embedding=emb).audio) for t in CALIBRATION])
            )
        target = median_log_f0(ref.audio)
        slope = level[1.0] - level[0.0]
        shift = float(np.clip((target - level[0.0]) / slope, -3, 3)) if abs(slope) > 1e-3 else 0.0
        row: dict[str, object] = {
            "reference": ref.name,
            "ref_f0": round(float(np.exp(target)), 1),
            "own_f0": round(float(np.exp(level[0.0])), 1),
            "slope": round(slope, 4),
            "shift": round(shift, 3),
        }
        for gain in gains:
            _shift["s"] = gain * shift
            row[f"gain_{gain}"] = score_variant(synth, sentences, emb, emb, table, scores[gain])
        per_ref.append(row)
        print(row, flush=True)
    header = {"model": args.model, "trials_per_gain": len(refs) * len(sentences)}
    report(args.out, header, scores, per_ref)


if __name__ == "__main__":
    main()
