"""Training data of the emotion judge: prosody features of teacher-corpus clips, relative to each speaker's
neutral speech.

Only teacher audio is used (recipes/corpus), never a model's output. Clips are sampled per speaker and emotion
(a seeded cap keeps the CPU pass to minutes); the `heldout-teacher` speakers are kept whole, since they are the
judge's validation set. A neutral clip is measured against the mean of its speaker's *other* neutral clips
(leave-one-out), so it does not sit at exactly zero.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from rtvox.eval.prosody import FEATURES, ProsodyExtractor, relative

HELDOUT_SPLIT = "heldout-teacher"
_worker: dict[str, Any] = {}


@dataclass(frozen=True)
class CorpusFeatures:
    """Absolute prosody features of sampled corpus clips, one row each."""

    ids: list[str]
    speakers: list[str]
    emotions: list[str]
    splits: list[str]
    features: np.ndarray  # float64 [N, len(FEATURES)]

    def save(self, path: Path) -> None:
        meta = {"ids": self.ids, "speakers": self.speakers, "emotions": self.emotions, "splits": self.splits}
        np.savez(path, features=self.features, meta=json.dumps({**meta, "feature_names": list(FEATURES)}))

    @classmethod
    def load(cls, path: Path) -> CorpusFeatures:
        with np.load(path) as data:
            meta = json.loads(str(data["meta"]))
            if meta["feature_names"] != list(FEATURES):
                raise ValueError(f"{path} was made with other prosody features; delete it to recompute")
            return cls(meta["ids"], meta["speakers"], meta["emotions"], meta["splits"], data["features"])

    def relative_features(self) -> np.ndarray:
        """Every row relative to its speaker's neutral mean (leave-one-out for the neutral rows themselves)."""
        out = np.zeros_like(self.features)
        by_speaker: dict[str, list[int]] = defaultdict(list)
        for i, speaker in enumerate(self.speakers):
            by_speaker[speaker].append(i)
        for speaker, rows in by_speaker.items():
            neutral = [i for i in rows if self.emotions[i] == "neutral"]
            if len(neutral) < 2:
                raise ValueError(f"speaker {speaker} has {len(neutral)} neutral clips; the judge needs at least 2")
            total = self.features[neutral].sum(0)
            for i in rows:
                if self.emotions[i] == "neutral":
                    reference = (total - self.features[i]) / (len(neutral) - 1)
                else:
                    reference = total / len(neutral)
                out[i] = relative(self.features[i], reference)
        return out


def sample_manifest(corpus: Path, *, max_neutral: int, max_other: int, seed: int = 0) -> list[dict[str, Any]]:
    """Seeded sample of manifest rows: per (speaker, emotion) at most max_neutral / max_other clips, except the
    heldout-teacher speakers, kept whole."""
    rows = [json.loads(line) for line in (corpus / "manifest.jsonl").read_text(encoding="utf-8").splitlines() if line]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["speaker"], row["emotion"])].append(row)
    rng = random.Random(seed)
    chosen: list[dict[str, Any]] = []
    for (_, emotion), items in sorted(groups.items()):
        if items[0]["split"] != HELDOUT_SPLIT:
            cap = max_neutral if emotion == "neutral" else max_other
            items = rng.sample(items, min(cap, len(items)))
        chosen.extend(items)
    return chosen


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)
    _worker["extractor"] = ProsodyExtractor()


def _measure(args: tuple[str, str]) -> np.ndarray | None:
    path, text = args
    wav, sr = sf.read(path, dtype="float32", always_2d=True)
    try:
        features: np.ndarray = _worker["extractor"](wav.mean(1), sr, text)
    except ValueError:  # too short after trimming: skipped
        return None
    return features


def extract_corpus_features(
    corpus: Path, *, max_neutral: int = 30, max_other: int = 14, seed: int = 0, jobs: int = 2
) -> CorpusFeatures:
    """Measure the sampled clips of a corpus (manifest.jsonl + wavs) with `jobs` processes."""
    rows = sample_manifest(corpus, max_neutral=max_neutral, max_other=max_other, seed=seed)
    work = [(str(corpus / r["path"]), str(r.get("spoken") or r["text"])) for r in rows]
    if jobs > 1:
        with mp.get_context("spawn").Pool(jobs, initializer=_init_worker) as pool:
            results = pool.map(_measure, work, chunksize=16)
    else:
        _init_worker()
        results = [_measure(w) for w in work]
    kept = [(r, f) for r, f in zip(rows, results, strict=True) if f is not None]
    return CorpusFeatures(
        ids=[r["id"] for r, _ in kept],
        speakers=[r["speaker"] for r, _ in kept],
        emotions=[r["emotion"] for r, _ in kept],
        splits=[r["split"] for r, _ in kept],
        features=np.stack([f for _, f in kept]) if kept else np.zeros((0, len(FEATURES))),
    )
