"""Probe: does a clip's own GE2E speaker embedding carry its emotion? CPU only.

    .venv/bin/python benchmarks/probes/ge2e_emotion_leak.py --corpus /work/corpus-v3b \
        --out benchmarks/results/quality/v81/ge2e_emotion_leak.json

Up to `--per-cell` clips per (training speaker, emotion) of a teacher corpus (seeded), embedded with the shipped
GE2E encoder as the packer embeds them. Reported: each emotion's mean cosine to its speaker's neutral mean, and
the accuracy of a nearest-centroid classifier of the five basic emotions on embeddings centred on their
speaker's neutral mean, leave-one-speaker-out (the classifier never sees the tested speaker). If the embedding
names the emotion, an acoustic model conditioned on it during training can take the emotion from the speaker
input instead of the label — what `rtvox train acoustic --speaker-ref neutral` avoids. Measurement only.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from rtvox.eval.judge_data import HELDOUT_SPLIT
from rtvox.models.speaker import SpeakerEncoder

BASIC = ("neutral", "happy", "sad", "angry", "surprised")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--per-cell", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = [json.loads(line) for line in (args.corpus / "manifest.jsonl").read_text("utf-8").splitlines() if line]
    cells: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        if row["split"] != HELDOUT_SPLIT:
            cells[(row["speaker"], row["emotion"])].append(row)
    rng = random.Random(args.seed)
    chosen = [r for key in sorted(cells) for r in rng.sample(cells[key], min(args.per_cell, len(cells[key])))]
    encoder = SpeakerEncoder.load()
    emb, spk, emo = [], [], []
    for row in chosen:
        wav, sr = sf.read(args.corpus / row["path"], dtype="float32")
        e = encoder.embed_reference(wav, sr)
        emb.append(e / np.linalg.norm(e))
        spk.append(row["speaker"])
        emo.append(row["emotion"])
    e_all, s_all, l_all = np.stack(emb), np.array(spk), np.array(emo)
    centred = e_all.copy()
    cosine: dict[str, list[float]] = defaultdict(list)
    for s in np.unique(s_all):
        mean = e_all[(s_all == s) & (l_all == "neutral")].mean(0)
        centred[s_all == s] -= mean
        for x, label in zip(e_all[s_all == s], l_all[s_all == s], strict=True):
            cosine[str(label)].append(float(x @ mean / np.linalg.norm(mean)))
    confusion: dict[str, Counter[str]] = {e: Counter() for e in BASIC}
    for s in np.unique(s_all):
        train, test = s_all != s, s_all == s
        centroids = np.stack([centred[train & (l_all == e)].mean(0) for e in BASIC])
        for x, label in zip(centred[test], l_all[test], strict=True):
            if label in BASIC:
                confusion[str(label)][BASIC[int(np.argmin(((centroids - x) ** 2).sum(1)))]] += 1
    right = sum(confusion[e][e] for e in BASIC)
    total = sum(sum(c.values()) for c in confusion.values())
    result = {
        "corpus": str(args.corpus),
        "clips": len(chosen),
        "speakers": int(np.unique(s_all).size),
        "cosine_to_speaker_neutral_mean": {e: round(float(np.mean(v)), 4) for e, v in sorted(cosine.items())},
        "nearest_centroid_accuracy_5": round(right / total, 4),
        "chance": round(1 / len(BASIC), 4),
        "confusion": {e: dict(c) for e, c in confusion.items()},
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "confusion"}))


if __name__ == "__main__":
    main()
