"""Ground-truth-aligned (GTA) mels for fine-tuning the vocoder on what the acoustic model really produces.

The vocoder is trained on mels computed from recordings, but at run time it hears the acoustic model's mels,
which are smoother. The classic cure (FastSpeech2 + HiFi-GAN recipes) is to fine-tune the vocoder on the acoustic
model's *teacher-forced* output paired with the recorded audio: the trainer's own aligner gives the durations, the
clip's own pitch and energy are fed in, so every predicted frame lines up with the audio sample-exactly (frame k
covers samples k·256 … k·256 + 255 of the trimmed clip, as in pack.py).

    .venv/bin/python -m recipes.train.gta --data /work/packed-v6 --snapshot /work/t12/soup \
        --corpus /work/corpus-v3b /work/corpus-v4a ... --shards acoustic-0.npz.xz --minutes 30 --out .gpu/G/gta-0.npz

Output: one `gta-<k>.npz` per call with `audio` (Opus blobs, pack.py's coding) + `audio_lengths`, `mel` (8-bit
codes over pack.py's log-mel range, frame-major, delta-coded and LZMA-compressed as one uint8 array) +
`frames` and `utt` (per clip); `rtvox train vocoder --gta-fraction` reads every gta-*.npz beside the vocoder shards.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from rtvox.audio.loudness import trim_silence
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.models.emotion import fuse_condition
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import load_acoustic_snapshot, targets
from rtvox.training.align import align_batch, flat_start_width
from rtvox.training.data import collate_acoustic, drop_ids, load_acoustic, speaker_prosody_stats
from rtvox.training.gta import GtaClip, save_gta


def corpus_paths(ids: list[str], roots: list[Path]) -> dict[str, Path]:
    """Utterance id (pack.py's "<corpus dir name>/<id>" for a pack of several corpora, else the bare id) → its
    audio file."""
    out: dict[str, Path] = {}
    for root in roots:
        for line in (root / "manifest.jsonl").read_text("utf-8").splitlines():
            row = json.loads(line)
            out[f"{root.name}/{row['id']}"] = root / row["path"]
            out.setdefault(str(row["id"]), root / row["path"])
    missing = [i for i in ids if i not in out]
    if missing:
        raise SystemExit(f"{len(missing)} utterances not found in the corpora given, e.g. {missing[0]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a pack.py directory")
    ap.add_argument("--shards", default="acoustic-0.npz.xz", help="comma-separated acoustic shards to draw from")
    ap.add_argument("--snapshot", type=Path, required=True, help="an acoustic training snapshot (aligner inside)")
    ap.add_argument("--corpus", type=Path, nargs="+", required=True, help="the corpus folders the pack was made of")
    ap.add_argument("--minutes", type=float, default=30.0, help="audio to take")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    t0 = time.monotonic()
    torch.set_grad_enabled(False)
    run, modules = load_acoustic_snapshot(args.snapshot, args.data)
    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(args.data, args.shards.split(",")), {vocab.id(s) for s in run.skip_symbols})
    stats = torch.from_numpy(speaker_prosody_stats(data))
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(data))
    frames_wanted = args.minutes * 60 * SAMPLE_RATE / HOP_LENGTH
    picked, total = [], 0
    for i in order:
        picked.append(int(i))
        total += int(data.mel_lengths[i])
        if total >= frames_wanted:
            break
    ids = [str(data.utt[i]) for i in picked]
    paths = corpus_paths(ids, args.corpus)
    clips: list[GtaClip] = []
    model, aligner = modules["acoustic"], modules["aligner"]
    l1_sum, l1_n = 0.0, 0
    for start in range(0, len(picked), args.batch):
        index = np.asarray(picked[start : start + args.batch])
        batch = collate_acoustic(data, index, torch.device("cpu"))
        _, durations = align_batch(
            aligner,  # type: ignore[arg-type]
            batch["ids"],
            batch["mel"],
            batch["ph_len"],
            batch["mel_len"],
            batch["ph_mask"],
            batch["frame_mask"],
            batch["ge2e"],
            flat_start_width(10**9, run.prior_width, run.flat_start),  # the trained aligner's own prior
        )
        _path, pitch, energy = targets(batch, durations, stats)
        emotion = modules["emotion_table"](batch["emotion"])
        cond = fuse_condition(batch["ge2e"], emotion, torch.ones(len(index)))
        out = model.forward_train(batch["ids"], batch["ph_mask"], cond, durations, pitch, energy)  # type: ignore[operator]
        for row, i in enumerate(index):
            n = int(batch["mel_len"][row])
            pred = out.mel_post[row, :, :n].float()
            l1_sum += float((pred - batch["mel"][row, :, :n]).abs().sum())
            l1_n += pred.numel()
            wav, sr = sf.read(paths[str(data.utt[i])], dtype="float32")
            assert sr == SAMPLE_RATE, f"{paths[str(data.utt[i])]}: {sr} Hz"
            wav = trim_silence(wav, sr)
            if len(wav) // HOP_LENGTH != n:
                raise SystemExit(f"{data.utt[i]}: {len(wav) // HOP_LENGTH} frames of audio against {n} packed")
            clips.append(GtaClip(pred.numpy(), wav[: n * HOP_LENGTH], str(data.utt[i])))
        print(f"{start + len(index)}/{len(picked)} clips, {time.monotonic() - t0:.0f} s", flush=True)
    size = save_gta(args.out, clips)
    summary = {
        "clips": len(clips),
        "minutes": round(sum(len(c.wav) for c in clips) / SAMPLE_RATE / 60, 2),
        "teacher_forced_mel_l1": round(l1_sum / max(l1_n, 1), 4),
        "bytes": size,
        "seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
