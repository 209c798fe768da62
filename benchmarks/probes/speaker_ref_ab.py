"""Probe: how much of the data's emotional pitch / energy / rate shift does an acoustic model's *label*
conditioning render, for runs trained with `--speaker-ref own` against `neutral`? CPU only.

    .venv/bin/python benchmarks/probes/speaker_ref_ab.py --data /work/packed-v3b \
        --run own=/work/ab/own/snapshot --run neutral=/work/ab/neutral/snapshot --out result.json

Data side: per utterance the mean voiced log-F0 and the mean frame energy (mean log-mel) in the speaker's z units
(the trainer's target normalization, data.speaker_prosody_stats) and the log frames per phoneme; per speaker,
each emotion's mean minus neutral's; the mean over speakers. Model side, per run: every speaker's mean neutral
GE2E embedding (as export builds built-in voices) with each emotion label at α = 1, on the phoneme sequences of
up to `--utterances` packed utterances; the variance predictors' outputs as inference computes them (pitch, then
energy after the pitch embedding, log durations), mean over phonemes, each label minus the neutral label, mean
over speakers and utterances. `share` = model shift / data shift. Measurement only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.constants import EMOTIONS
from rtvox.models.emotion import fuse_condition
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import AcousticRun, build_modules, run_config
from rtvox.training.checkpoint import load_snapshot
from rtvox.training.data import (
    AcousticSet,
    drop_ids,
    frame_energy,
    frame_log_f0,
    load_acoustic,
    speaker_prosody_stats,
)
from rtvox.training.export import speaker_means

QUANTITIES = ("pitch_z", "energy_z", "log_frames_per_phoneme")


def data_shifts(data: AcousticSet) -> dict[str, dict[str, float]]:
    stats = speaker_prosody_stats(data)
    energy = frame_energy(data)
    log_f0, voiced = frame_log_f0(data)
    rows = np.full((len(data), 3), np.nan)
    for u in range(len(data)):
        a, b = data.mel_off[u], data.mel_off[u + 1]
        s = stats[data.speaker[u]]
        v = voiced[a:b]
        if v.sum() >= 5:
            rows[u, 0] = ((log_f0[a:b][v] - s[0]) / s[1]).mean()
        rows[u, 1] = ((energy[a:b] - s[2]) / s[3]).mean()
        rows[u, 2] = np.log((b - a) / max(1, data.ph_off[u + 1] - data.ph_off[u]))
    names = data.info.emotions
    out = {}
    for e, name in enumerate(names):
        if name == "neutral":
            continue
        diffs = []
        for spk in np.unique(data.speaker):
            mine = data.speaker == spk
            emo, neu = rows[mine & (data.emotion == e)], rows[mine & (data.emotion == names.index("neutral"))]
            if len(emo) >= 3 and len(neu) >= 3:
                diffs.append(np.nanmean(emo, 0) - np.nanmean(neu, 0))
        if diffs:
            out[name] = dict(zip(QUANTITIES, np.round(np.mean(diffs, 0), 4).tolist(), strict=True))
    return out


@torch.no_grad()
def model_shifts(snapshot: Path, data: AcousticSet, utterances: int, preset: str) -> dict[str, dict[str, float]]:
    vocab = Vocabulary.default()
    progress = json.loads((snapshot / "progress.json").read_text("utf-8"))
    run = AcousticRun(
        Path("."),
        Path("."),
        preset=progress.get("preset", preset),
        device="cpu",
        frame_position=bool(progress.get("frame_position", False)),
    )
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    load_snapshot(snapshot, modules)
    model, table = modules["acoustic"].eval(), modules["emotion_table"].eval()
    means = speaker_means(data)
    rng = np.random.default_rng(0)
    picks = rng.choice(len(data), size=min(utterances, len(data)), replace=False)
    n_max = int(max(data.ph_off[u + 1] - data.ph_off[u] for u in picks))
    ids = torch.zeros(len(picks), n_max, dtype=torch.long)
    for row, u in enumerate(picks):
        seq = torch.from_numpy(data.ids[data.ph_off[u] : data.ph_off[u + 1]].astype(np.int64))
        ids[row, : len(seq)] = seq
    mask = ids > 0
    per_label: dict[str, list[np.ndarray]] = {e: [] for e in EMOTIONS}
    for name in data.info.speakers:
        if name not in means:
            continue
        ge2e = torch.from_numpy(means[name])[None].expand(len(picks), -1)
        for e in EMOTIONS:
            emotion = table(torch.full((len(picks),), EMOTIONS.index(e), dtype=torch.long))
            cond = fuse_condition(ge2e, emotion, torch.ones(len(picks)))
            x = model._encode_text(ids, mask, cond)
            v = model.variance
            pitch = v.pitch(x, mask)
            energy = v.energy(x + v.pitch_embed(pitch, mask), mask)
            log_dur = v.duration(x, mask)
            m = mask.float()
            row = [(q * m).sum(1) / m.sum(1) for q in (pitch, energy, log_dur)]
            per_label[e].append(torch.stack(row, 1).numpy())
    neutral = np.concatenate(per_label["neutral"])
    out = {}
    for e in EMOTIONS:
        if e == "neutral":
            continue
        diff = (np.concatenate(per_label[e]) - neutral).mean(0)
        # log-duration predictor units: log(1 + frames); a shift is close to the log rate ratio
        out[e] = dict(zip(QUANTITIES, np.round(diff, 4).tolist(), strict=True))
    out["_step"] = progress.get("step")  # type: ignore[assignment]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--run", action="append", required=True, help="NAME=SNAPSHOT_DIR")
    p.add_argument("--utterances", type=int, default=48)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(2)
    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(args.data), {vocab.id(s) for s in ("#1", "#2")})
    result: dict[str, Any] = {"data": str(args.data), "data_shift": data_shifts(data), "runs": {}}
    for spec in args.run:
        name, path = spec.split("=", 1)
        shifts = model_shifts(Path(path), data, args.utterances, args.preset)
        share = {
            e: {q: round(shifts[e][q] / d[q], 3) if abs(d[q]) > 1e-3 else None for q in QUANTITIES}
            for e, d in result["data_shift"].items()
            if e in shifts
        }
        result["runs"][name] = {"snapshot": path, "shift": shifts, "share": share}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, r in result["runs"].items():
        print(name, json.dumps(r["share"]))


if __name__ == "__main__":
    main()
