"""Paired comparison of two models' cloning trials (`rtvox eval --clone` JSONs made on the same references and
sentences): mean cosine to the reference of each, the mean of B minus A over the shared trials with a 95 %
bootstrap interval (trials resampled), and each one's share closer to its reference than to any built-in voice.

    python3 benchmarks/probes/clone_paired.py A.json B.json [C.json ...]   # every later model against the first
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def trials(path: str) -> dict[tuple[str, str], tuple[float, bool]]:
    clone = json.loads(Path(path).read_text(encoding="utf-8"))["clone"]
    return {
        (ref["reference"], t["text"]): (t["cosine_to_reference"], t["closer_to_reference"])
        for ref in clone["per_reference"]
        for t in ref["trials"]
    }


def _summary(d: dict[tuple[str, str], tuple[float, bool]], keys: list[tuple[str, str]]) -> str:
    cosine = sum(d[k][0] for k in keys) / len(keys)
    return f"cosine {cosine:.4f}, closer {sum(d[k][1] for k in keys)}/{len(keys)}"


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: clone_paired.py A.json B.json [C.json ...]")
    base = trials(sys.argv[1])
    for other_path in sys.argv[2:]:
        other = trials(other_path)
        keys = sorted(set(base) & set(other))
        if not keys:
            sys.exit(f"{other_path} shares no trial with {sys.argv[1]}")
        diffs = [other[k][0] - base[k][0] for k in keys]
        rng = random.Random(0)
        boot = sorted(sum(rng.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(4000))
        mean = sum(diffs) / len(diffs)
        print(f"{len(keys)} trials: A {_summary(base, keys)}; B {_summary(other, keys)} ({other_path})")
        print(f"  B - A cosine {mean:+.4f} [{boot[100]:+.4f}, {boot[3899]:+.4f}]")


if __name__ == "__main__":
    main()
