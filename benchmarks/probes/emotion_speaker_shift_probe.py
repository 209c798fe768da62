"""Probe: emotion through the speaker input. CPU only; measurement, nothing shipped.

    .venv/bin/python benchmarks/probes/emotion_speaker_shift_probe.py --model <dir> --data /work/packed-v6 \
        --beta 1 --sets en,zh --out benchmarks/results/quality/v81/speaker_shift/b1.json

Models trained on each clip's own GE2E embedding (every rtvox-small up to 8.1.0) learned to take an emotion from
the speaker input, because that embedding carries it (benchmarks/probes/ge2e_emotion_leak.py). This probe asks
whether moving a voice's embedding the way the training data's emotional clips move it renders the emotion
inside what the model was trained on: for each label e, the data's shift d_e = mean over training speakers of
(unit mean GE2E of the speaker's e clips − unit mean GE2E of its neutral clips), and a label request is
conditioned on unit(voice + β·α·d_e) ⊕ α·table(e) instead of voice ⊕ α·table(e). Then `rtvox eval` runs as
usual (its --emotion check renders label requests). Use a model directory without `emotion_prosody` in its
config to hear the shift alone (and without `emotion_speaker_shift`, which would add to this one); the prior was
solved without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from rtvox.eval.intelligibility import parse_sets
from rtvox.eval.runner import EvalOptions, run_eval, write_results
from rtvox.models.prosody import EmotionSpeakerShift
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.training.data import load_acoustic
from rtvox.training.speaker_shift import speaker_shift


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--sets", default="en,zh")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    measured = speaker_shift(load_acoustic(args.data))
    shift = EmotionSpeakerShift({k: tuple(args.beta * x for x in v) for k, v in measured.shifts.items()})
    print({k: round(float(np.linalg.norm(v)), 3) for k, v in measured.shifts.items()}, flush=True)
    plain = Synthesizer.condition

    def shifted(self: Synthesizer, request):  # type: ignore[no-untyped-def]
        if request.emotion_ref is not None:
            return plain(self, request)
        base = request.speaker_embedding
        if base is None:
            base = self.voices.get(request.voice or self.default_voice).embedding
        moved = shift.apply(base, request.emotion, float(request.emotion_alpha))
        return plain(self, dataclasses.replace(request, speaker_embedding=moved))

    Synthesizer.condition = shifted  # type: ignore[method-assign]
    options = EvalOptions(
        sets=parse_sets(args.sets, None, None),
        model=args.model,
        audio_dir=None,
        voice=None,
        clone=False,
        emotion=True,
        duration=False,
        corpus=None,
        clone_refs=[],
        judge_dir=None,
        threads=2,
        keep_audio=None,
        backend="eager",
        command=shlex.join(["python", *sys.argv]),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md = write_results(run_eval(options), args.out)
    (args.out.with_suffix(".shifts.json")).write_text(json.dumps(measured.to_dict()), "utf-8")
    print(md.read_text("utf-8"))


if __name__ == "__main__":
    main()
