"""Paired comparison of two models' emotion evals (`rtvox eval --emotion` JSONs on the same sentences): the ASR
error of the emotional clips (every label but neutral, first voice) per language, and of the angry ones, for each
model, and B minus A with a 95 % bootstrap interval (sentences resampled, the same draw for both models).

    python3 benchmarks/probes/emotion_paired.py A.json B.json [C.json ...]   # every later model against the first
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

Counts = dict[str, list[tuple[int, int]]]  # "emotion/lang" -> per sentence (errors, reference length)


def counts(path: str) -> tuple[Counts, float]:
    emotion = json.loads(Path(path).read_text(encoding="utf-8"))["emotion"]
    table = {k: [(int(e), int(n)) for e, n in v] for k, v in emotion["error_counts_by_sentence"].items()}
    return table, float(emotion["accuracy"])


def pooled(table: Counts, keys: list[str], picks: dict[str, list[int]] | None = None) -> float:
    errors = length = 0
    for key in keys:
        rows = table[key]
        for i in picks[key] if picks else range(len(rows)):
            errors += rows[i][0]
            length += rows[i][1]
    return errors / max(length, 1)


def compare(a: Counts, b: Counts, keys: list[str]) -> str:
    rng = random.Random(0)
    diffs = []
    for _ in range(2000):
        picks = {k: [rng.randrange(len(a[k])) for _ in a[k]] for k in keys}
        diffs.append(pooled(b, keys, picks) - pooled(a, keys, picks))
    diffs.sort()
    delta = pooled(b, keys) - pooled(a, keys)
    return f"{100 * pooled(b, keys):.1f} % ({100 * delta:+.1f} [{100 * diffs[50]:+.1f}, {100 * diffs[1949]:+.1f}])"


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: emotion_paired.py A.json B.json [C.json ...]")
    base, base_accuracy = counts(sys.argv[1])
    groups = {
        f"{what} {lang}": [k for k in base if k.endswith(f"/{lang}") and (k.startswith("angry") or what == "emotional")]
        for what in ("emotional", "angry")
        for lang in ("en", "zh")
    }
    groups = {name: [k for k in keys if not k.startswith("neutral")] for name, keys in groups.items()}
    print(
        f"A {sys.argv[1]}: accuracy {100 * base_accuracy:.1f} %; "
        + "; ".join(f"{name} {100 * pooled(base, keys):.1f} %" for name, keys in groups.items())
    )
    for path in sys.argv[2:]:
        other, accuracy = counts(path)
        print(f"B {path}: accuracy {100 * accuracy:.1f} %")
        for name, keys in groups.items():
            print(f"  {name}: {compare(base, other, keys)}")


if __name__ == "__main__":
    main()
