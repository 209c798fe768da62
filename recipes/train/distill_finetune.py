"""Fine-tune a distilled decoder on emotion-weighted or clone-weighted pairs, on the CPU or a GPU (D2's A -> A2 -> A3).

Student A of "Decoder distillation D2" (recipes/train/README.md) read angry speech worse than its teacher; A2 is A
trained 300 more steps on pairs whose requests are mostly emotional (angry 3/7, surprised, happy, sad and neutral
1/7 each), made on the CPU from texts the GPU run did not sample first:

    .venv/bin/python -m recipes.train.distill_finetune --teacher TEACHER_DIR --student STUDENT_DIR \
        --texts .gpu/distill_texts.txt --out OUT_DIR      # ~8 minutes on 2 cores

A3 is A2 trained on pairs of which 60 % speak with the embedding of a reference clip of a random new voice
(recipes/train/distill_voices.py), emotions drawn as in D2 (neutral 2/6, each other label 1/6), so the student's
clones follow the teacher's:

    .venv/bin/python -m recipes.train.distill_finetune --teacher TEACHER_DIR --student A2_DIR \
        --texts .gpu/distill_texts.txt --first 3500 --mix even --clips /work/distill-voices --clip-share 0.6 \
        --steps 400 --out OUT_DIR

`--student` is a model directory or a file of decoder-side weights (`decoder.`, `mel_out.`, `frame_pos.`, `postnet.`
keys, as benchmarks/results/distill/d2/decoder-A2.safetensors), whose shape (blocks, kernel, postnet) is read from
the weights. `--device cuda --minutes M` trains on a GPU until the step count or the time budget ends.

Writes OUT_DIR (the teacher's directory with the student's acoustic weights) and prints the valid mel L1.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from rtvox.models.acoustic import AcousticModel
from rtvox.models.bundle import ModelBundle
from rtvox.training import distill

EMOTION_MIX = ("angry", "angry", "angry", "surprised", None, "happy", "sad")


def load_student(teacher: AcousticModel, student: Path) -> AcousticModel:
    """The student from a model directory, or from a decoder-side weights file laid over the teacher."""
    if student.is_dir():
        return ModelBundle.load(student).acoustic
    weights = {k: v.float() for k, v in load_file(str(student)).items()}
    blocks = sorted({int(k.split(".")[2]) for k in weights if k.startswith("decoder.blocks.")})
    kernel = max(int(v.shape[-1]) for k, v in weights.items() if k.startswith("decoder.blocks.0.") and v.ndim == 3)
    # student block j starts as (and is pulled toward) teacher block j: D2's A keeps every block, in order
    shape = distill.StudentShape(tuple(blocks), kernel, any(k.startswith("postnet.") for k in weights))
    model = distill.student_from_teacher(teacher, shape)
    missing = [k for k in model.state_dict() if k.startswith(distill.DECODER_PREFIXES) and k not in weights]
    if missing:
        raise SystemExit(f"{student}: no weights for {', '.join(missing[:4])}")
    model.load_state_dict(weights, strict=False)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", type=Path, required=True)
    parser.add_argument("--student", type=Path, required=True, help="a model directory or decoder weights")
    parser.add_argument("--texts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--first", type=int, default=3000, help="first text line used")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--version", default="8.9.1-d2ft")
    parser.add_argument("--mix", choices=("emotion", "even"), default="emotion", help="emotion-weighted or D2's mix")
    parser.add_argument(
        "--clips",
        type=Path,
        help="folder of reference clips (*.wav, *.flac) for clone-like pairs, or a .npy of "
        "their embeddings (written beside OUT_DIR as OUT_DIR.clips.npy when a folder is given)",
    )
    parser.add_argument("--clip-share", type=float, default=0.0, help="share of pairs that speak with a clip")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--minutes", type=float, help="stop training after this many minutes")
    parser.add_argument("--batch-frames", type=int, default=3000)
    parser.add_argument("--valid", type=int, default=40, help="pairs held out to measure the mel L1")
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = [line.strip() for line in args.texts.read_text(encoding="utf-8").splitlines() if line.strip()]
    embeddings = np.zeros((0, 1), np.float32)
    if args.clips and args.clips.suffix == ".npy":
        embeddings = np.load(args.clips)
    elif args.clips:
        clips = sorted(p for p in args.clips.iterdir() if p.suffix in (".wav", ".flac"))
        if not clips:
            parser.error(f"--clips {args.clips}: no .wav or .flac files there")
        embeddings = distill.embed_clips(args.teacher, clips)
        np.save(args.out.with_name(args.out.name + ".clips.npy"), embeddings)
    pairs = distill.make_pairs(
        args.teacher,
        lines[args.first : args.first + args.count],
        seed=7,
        device=args.device,
        emotions=EMOTION_MIX if args.mix == "emotion" else distill.EMOTION_CHOICES,
        clip_embeddings=list(embeddings),
        clip_share=args.clip_share,
    )
    order = list(range(len(pairs)))
    random.Random(0).shuffle(order)
    valid, train = [pairs[i] for i in order[: args.valid]], [pairs[i] for i in order[args.valid :]]
    teacher = ModelBundle.load(args.teacher).acoustic.to(args.device).eval()
    student = load_student(teacher, args.student).to(args.device).eval()
    print(f"{len(pairs)} pairs; valid L1 before {distill.evaluate(student, valid, args.batch_frames):.4f}")
    blocks = tuple(range(student.config.decoder_layers))  # student block j against teacher block j (see above)
    figures = distill.train_student(
        student,
        train,
        valid,
        steps=args.steps,
        batch_frames=args.batch_frames,
        lr=args.lr,
        run_dir=Path(tempfile.mkdtemp()),
        seed=0,
        save_every=100,
        minutes=args.minutes,
        features=distill.FeatureTarget(teacher, blocks, 1.0),
    )
    distill.write_student(args.teacher, args.out, student.cpu().eval(), args.version)
    print(f"valid L1 after {figures['valid_l1']:.4f} at step {int(figures['step'])}; wrote {args.out}")


if __name__ == "__main__":
    main()
