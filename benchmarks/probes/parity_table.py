"""Issue 4's Whisper parity from `rtvox eval --audio-dir` results: per voice and pooled WER/CER of a backend
against eager fp32 on the same sentences, and a paired bootstrap 95 % interval of the pooled difference
(resampling (voice, sentence) pairs, so the interval says how well the set resolves a 0.5-point bound).

    python benchmarks/probes/parity_table.py DIR [--voices mei,joe,jun,sally] [--backend graphs] [--set en]
    # DIR holds eager-<voice>.json and <backend>-<voice>.json (rtvox eval --audio-dir ... --out ...)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rtvox.eval.expressive import paired_delta_interval


def _items(path: Path, set_name: str) -> tuple[str, list[tuple[str, int, int]]]:
    data = json.loads(path.read_text("utf-8"))["sets"][set_name]
    metric = data["summary"]["primary"]
    rows = [
        (it["text"], it["metrics"][metric]["errors"], it["metrics"][metric]["reference_length"]) for it in data["items"]
    ]
    return metric, rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--voices", default="mei,joe,jun,sally")
    p.add_argument("--backend", default="graphs")
    p.add_argument("--set", dest="set_name", default="en")
    p.add_argument("--resamples", type=int, default=10000)
    args = p.parse_args()
    pairs: list[tuple[int, int, int]] = []  # (eager errors, backend errors, reference length) per clip
    metric = "wer"
    print(f"| voice | {args.set_name} clips | eager | {args.backend} | difference (points) |")
    print("|---|---|---|---|---|")
    for voice in args.voices.split(","):
        metric, eager = _items(args.dir / f"eager-{voice}.json", args.set_name)
        _, other = _items(args.dir / f"{args.backend}-{voice}.json", args.set_name)
        assert [t for t, _, _ in eager] == [t for t, _, _ in other], f"{voice}: the two runs scored other sentences"
        rows = [(e, o, n) for (_, e, n), (_, o, _) in zip(eager, other, strict=True)]
        pairs += rows
        ref = sum(n for _, _, n in rows)
        a, b = sum(e for e, _, _ in rows) / ref * 100, sum(o for _, o, _ in rows) / ref * 100
        print(f"| {voice} | {len(rows)} | {a:.2f} % | {b:.2f} % | {b - a:+.2f} |")
    arr = np.asarray(pairs, dtype=np.float64)
    ref = arr[:, 2].sum()
    a, b = arr[:, 0].sum() / ref * 100, arr[:, 1].sum() / ref * 100
    lo, hi = (
        100 * x
        for x in paired_delta_interval(
            [(o, n) for _, o, n in pairs], [(e, n) for e, _, n in pairs], draws=args.resamples
        )
    )
    changed = int((arr[:, 0] != arr[:, 1]).sum())
    unit = "words" if metric == "wer" else "characters"
    print(
        f"| **pooled** ({len(arr)} clips, {int(ref)} reference {unit}) | | "
        f"**{a:.2f} %** | **{b:.2f} %** | **{b - a:+.2f}** [{lo:+.2f}, {hi:+.2f}] |"
    )
    print(
        f"\nclips whose error count differs: {changed} of {len(arr)}; {metric.upper()} difference 95 % paired "
        f"bootstrap interval [{lo:+.2f}, {hi:+.2f}] points ({args.resamples} resamples)"
    )


if __name__ == "__main__":
    main()
