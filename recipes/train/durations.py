"""Phoneme durations (mel frames) of every utterance of a packed corpus, from a trained acoustic snapshot's aligner.

The autoregressive family's phoneme-pointer tokens (rtvox.models.codec) need to know which phoneme each acoustic
token covers; the default family's trainer finds that alignment as it trains (rtvox.training.align), so its
aligner, run once over the corpus with the same skipped symbols, gives the AR trainers their durations:

    .venv/bin/python -m recipes.train.durations --data /work/packed-v6 --snapshot /work/t12/soup \
        --out /work/packed-v6-durations.npz

The file keys durations by utterance name (`utt`, `ph_len`, flat `dur`), so a trainer that loads only some of the
shards still finds its rows (rtvox.training.ar.load_durations checks every phoneme count).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import load_acoustic_snapshot
from rtvox.training.align import Aligner, align_batch
from rtvox.training.data import collate_acoustic, drop_ids, load_acoustic


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="packed shard directory")
    parser.add_argument("--snapshot", type=Path, required=True, help="acoustic training snapshot with aligner")
    parser.add_argument("--out", type=Path, required=True, help="durations .npz to write")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)

    run, modules = load_acoustic_snapshot(args.snapshot, args.data)
    aligner = modules["aligner"]
    assert isinstance(aligner, Aligner)
    device = torch.device(args.device)
    aligner.to(device)
    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(args.data), {vocab.id(s) for s in run.skip_symbols})
    order = np.argsort(data.mel_lengths, kind="stable")
    durations: list[np.ndarray] = [np.zeros(0, np.int16)] * len(data)
    t0 = time.monotonic()
    with torch.no_grad():
        for start in range(0, len(order), args.batch):
            rows = order[start : start + args.batch]
            b = collate_acoustic(data, rows, device)
            _, dur = align_batch(
                aligner, b["ids"], b["mel"], b["ph_len"], b["mel_len"], b["ph_mask"], b["frame_mask"], b["ge2e"]
            )
            for row, d, n in zip(rows, dur.cpu().numpy(), b["ph_len"].tolist(), strict=True):
                durations[row] = d[:n].astype(np.int16)
            if start // args.batch % 50 == 0:
                print(f"{start + len(rows)}/{len(order)} utterances, {time.monotonic() - t0:.0f} s", flush=True)
    ph_len = np.array([len(d) for d in durations], np.int32)
    flat = np.concatenate(durations)
    sums = np.add.reduceat(flat.astype(np.int64), np.concatenate([[0], np.cumsum(ph_len)[:-1]]))
    if not np.array_equal(sums, data.mel_lengths):
        raise SystemExit("durations do not sum to the mel lengths: the aligner and the data disagree")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, utt=np.array(data.utt), ph_len=ph_len, dur=flat)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {len(data)} utterances, {len(flat)} phonemes, {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
