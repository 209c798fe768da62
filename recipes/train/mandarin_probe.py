"""Where Mandarin intelligibility is lost: Whisper CER of one set of *trained* sentences rendered four ways,
so each stage of the acoustic model is measured against the one before it.

    .venv/bin/python -m recipes.train.mandarin_probe --data /work/packed16 --shard acoustic-0.npz.xz \
        --snapshot /work/snapT8/c2/pack/acoustic --corpus /work/corpus8 /work/corpus8v2 --category everyday2

For the first N neutral Mandarin utterances of `--category` in the shard (the trainer saw each of them), with the
clip's own GE2E speaker embedding:
  free      the model as it runs: its own durations, pitch and energy
  tdur      the aligner's durations for the clip (what training used), the model's pitch and energy
  tdur_tpe  the aligner's durations and the clip's own per-phoneme pitch and energy (teacher forcing)
  copy      the clip's own log-mel (the ceiling: what the vocoder makes of real speech)
Each mel is voiced by the model's vocoder and, with --griffin-lim, also by Griffin-Lim (no learned vocoder: a
stage that loses intelligibility under both is losing it in the mel, not in the vocoder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from rtvox.constants import HOP_LENGTH, MEL_FMAX, MEL_FMIN, N_FFT, SAMPLE_RATE, WIN_LENGTH
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.metrics import ErrorCounts, score
from rtvox.models.acoustic import AcousticModel
from rtvox.models.bundle import ModelBundle
from rtvox.models.emotion import fuse_condition
from rtvox.models.prosody import IDENTITY_ROW
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import load_acoustic_snapshot, targets
from rtvox.training.align import Aligner, align_batch
from rtvox.training.data import collate_acoustic, drop_ids, load_acoustic, speaker_prosody_stats

WAYS = ("free", "tdur", "tdur_tpe", "copy")


def _griffin_lim(log_mel: np.ndarray) -> np.ndarray:
    import librosa

    # mel → linear magnitude, then Griffin-Lim with a fixed seed (mel_to_audio would pass random_state on to the
    # mel filter bank, which librosa 0.11 rejects)
    magnitude = librosa.feature.inverse.mel_to_stft(
        np.exp(log_mel), sr=SAMPLE_RATE, n_fft=N_FFT, fmin=MEL_FMIN, fmax=MEL_FMAX, power=1.0, htk=False,
        norm="slaney",
    )  # fmt: skip
    wav = librosa.griffinlim(
        magnitude, n_iter=48, hop_length=HOP_LENGTH, win_length=WIN_LENGTH, n_fft=N_FFT, random_state=0
    )
    return np.asarray(wav / max(1e-3, float(np.abs(wav).max())) * 0.8, dtype=np.float32)


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="packed shards folder (pack.json inside)")
    parser.add_argument("--shard", default="acoustic-0.npz.xz")
    parser.add_argument("--snapshot", type=Path, required=True, help="acoustic training snapshot (with aligner)")
    parser.add_argument("--model", default="models/rtvox-small", help="model directory whose vocoder voices mels")
    parser.add_argument("--corpus", type=Path, nargs="+", required=True, help="corpus folders the shard came from")
    parser.add_argument("--category", default="everyday2", help="sentence category of the corpus manifest")
    parser.add_argument("--n", type=int, default=14)
    parser.add_argument("--griffin-lim", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="JSON report")
    args = parser.parse_args()
    torch.set_num_threads(2)

    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(args.data, [args.shard]), {vocab.id(s) for s in ("#1", "#2")})
    manifest = {}
    for corpus in args.corpus:
        for line in (corpus / "manifest.jsonl").read_text("utf-8").splitlines():
            row = json.loads(line)
            manifest[f"{corpus.name}/{row['id']}"] = row
    picked = [
        i
        for i, utt in enumerate(data.utt)
        if utt in manifest
        and manifest[utt]["category"] == args.category
        and manifest[utt]["lang"] == "zh"
        and manifest[utt]["emotion"] == "neutral"
    ][: args.n]
    if not picked:
        raise SystemExit(f"no neutral Mandarin {args.category!r} utterances of {args.corpus} in {args.shard}")

    run, modules = load_acoustic_snapshot(args.snapshot, args.data)
    model, aligner = modules["acoustic"], modules["aligner"]
    assert isinstance(model, AcousticModel) and isinstance(aligner, Aligner)
    stats = torch.from_numpy(speaker_prosody_stats(data))
    vocoder = ModelBundle.load(args.model, device="cpu").vocoder.eval()
    neutral = modules["emotion_table"](torch.tensor([0]))
    one, free, identity = torch.ones(1), torch.zeros(1, dtype=torch.long), torch.tensor([IDENTITY_ROW])
    asr = WhisperJudge()
    totals = {f"{way}{suffix}": ErrorCounts() for way in WAYS for suffix in ("", "_gl")}
    for i in picked:
        batch = collate_acoustic(data, np.array([i]), torch.device("cpu"))
        _, durations = align_batch(
            aligner, batch["ids"], batch["mel"], batch["ph_len"], batch["mel_len"],
            batch["ph_mask"], batch["frame_mask"], batch["ge2e"], run.prior_width,
        )  # fmt: skip
        _, pitch, energy = targets(batch, durations, stats)
        ids, mask, cond = batch["ids"], batch["ph_mask"], fuse_condition(batch["ge2e"], neutral, one)
        hidden, own = model.encode(ids, mask, cond, one, free, one, one, identity)  # its own pitch and energy
        mels = {
            "free": model.decode(hidden, own),
            "tdur": model.decode(hidden, durations),
            "tdur_tpe": model.forward_train(ids, mask, cond, durations, pitch, energy).mel_post,
            "copy": batch["mel"],
        }
        text = manifest[data.utt[i]]["text"]
        for way, mel in mels.items():
            wavs = {"": vocoder(mel.float()).squeeze().numpy()}
            if args.griffin_lim:
                wavs["_gl"] = _griffin_lim(mel.float().squeeze(0).numpy())
            for suffix, wav in wavs.items():
                heard = asr.transcribe(wav, SAMPLE_RATE, language="zh").text
                totals[way + suffix] = totals[way + suffix] + score(text, heard, "zh")["cer"]
        print(text, {k: round(v.rate, 3) for k, v in totals.items() if v.reference_length}, flush=True)
    report = {
        "shard": args.shard,
        "snapshot": str(args.snapshot),
        "category": args.category,
        "sentences": len(picked),
        "cer": {k: round(v.rate, 4) for k, v in totals.items() if v.reference_length},
    }
    print(json.dumps(report, indent=1, ensure_ascii=False))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
