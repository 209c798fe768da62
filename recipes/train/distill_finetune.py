"""Fine-tune a distilled decoder on emotion-weighted pairs, on the CPU (D2's student A -> A2).

Student A of "Decoder distillation D2" (recipes/train/README.md) read angry speech worse than its teacher; A2 is A
trained 300 more steps on pairs whose requests are mostly emotional (angry 3/7, surprised, happy, sad and neutral
1/7 each), made on the CPU from texts the GPU run did not sample first:

    .venv/bin/python -m recipes.train.distill_emotion_finetune --teacher TEACHER_DIR --student STUDENT_DIR \
        --texts .gpu/distill_texts.txt --out OUT_DIR      # ~8 minutes on 2 cores

Writes OUT_DIR (the teacher's directory with the student's acoustic weights) and prints the valid mel L1.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import torch

from rtvox.models.bundle import ModelBundle
from rtvox.training import distill

EMOTION_MIX = ("angry", "angry", "angry", "surprised", None, "happy", "sad")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", type=Path, required=True)
    parser.add_argument("--student", type=Path, required=True)
    parser.add_argument("--texts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--first", type=int, default=3000, help="first text line used")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--version", default="8.9.1-d2ft")
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = [line.strip() for line in args.texts.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = distill.make_pairs(args.teacher, lines[args.first : args.first + args.count], seed=7, emotions=EMOTION_MIX)
    order = list(range(len(pairs)))
    random.Random(0).shuffle(order)
    valid, train = [pairs[i] for i in order[:40]], [pairs[i] for i in order[40:]]
    teacher = ModelBundle.load(args.teacher).acoustic.eval()
    student = ModelBundle.load(args.student).acoustic.eval()
    print(f"{len(pairs)} pairs; valid L1 before {distill.evaluate(student, valid, 3000):.4f}")
    blocks = tuple(range(student.config.decoder_layers))  # D2's A keeps every block, in order
    figures = distill.train_student(
        student,
        train,
        valid,
        steps=args.steps,
        batch_frames=3000,
        lr=args.lr,
        run_dir=Path(tempfile.mkdtemp()),
        seed=0,
        save_every=100,
        features=distill.FeatureTarget(teacher, blocks, 1.0),
    )
    distill.write_student(args.teacher, args.out, student.eval(), args.version)
    print(f"valid L1 after {figures['valid_l1']:.4f}; wrote {args.out}")


if __name__ == "__main__":
    main()
