"""Summarize a corpus manifest and sanity-check its audio: ``python -m recipes.corpus.report DIR --check N``.

Prints hours per language, emotion, split, speaker family and source teacher, and (with --check)
speech-likeness stats of up to N clips per source teacher: duration, RMS level, voiced share and F0
percentiles. A clip that is silence or noise fails ``SpeechStats.looks_like_speech`` and is listed.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
from recipes.corpus.audio import read_wav, speech_stats
from recipes.corpus.manifest import MANIFEST_NAME, Record, read_manifest


def _hours_by(records: list[Record], key: str) -> str:
    acc: dict[str, float] = defaultdict(float)
    for r in records:
        acc[str(getattr(r, key)) if key != "teachers" else "+".join(sorted(set(r.teachers)))] += r.duration_s
    return ", ".join(f"{k} {v / 3600:.3f}h" for k, v in sorted(acc.items(), key=lambda kv: -kv[1]))


def summarize(records: list[Record]) -> str:
    total = sum(r.duration_s for r in records)
    lines = [f"{len(records)} utterances, {total / 3600:.3f} h, {len({r.speaker for r in records})} speakers"]
    for key in ("lang", "emotion", "split", "base_teacher", "teachers", "category"):
        lines.append(f"  {key}: {_hours_by(records, key)}")
    return "\n".join(lines)


def check_audio(root: Path, records: list[Record], per_teacher: int) -> tuple[str, list[str]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups["+".join(sorted(set(r.teachers))) or r.base_teacher].append(r)
    lines, bad = [], []
    for name, group in sorted(groups.items()):
        stats = []
        for r in group[:per_teacher]:
            audio, rate = read_wav(root / r.path)
            s = speech_stats(audio, rate)
            stats.append(s)
            if not s.looks_like_speech():
                bad.append(f"{r.id}: {s}")
        arr = np.array(
            [[s.duration_s, s.rms_dbfs, s.voiced_ratio, s.f0_p5_hz, s.f0_median_hz, s.f0_p95_hz] for s in stats]
        )
        m = arr.mean(axis=0)
        lines.append(
            f"  {name:24s} n={len(stats):3d} dur {m[0]:5.2f}s rms {m[1]:6.1f} dBFS voiced {m[2]:.2f} "
            f"F0 p5/p50/p95 {m[3]:4.0f}/{m[4]:4.0f}/{m[5]:4.0f} Hz"
        )
    return "\n".join(lines), bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, help="folder holding manifest.jsonl")
    p.add_argument("--check", type=int, default=0, metavar="N", help="measure up to N clips per source teacher")
    args = p.parse_args(argv)
    records = list(read_manifest(args.corpus / MANIFEST_NAME))
    if not records:
        print(f"error: no records in {args.corpus / MANIFEST_NAME}")
        return 2
    print(summarize(records))
    if args.check:
        table, bad = check_audio(args.corpus, records, args.check)
        print("speech check (means per source teacher):\n" + table)
        print(f"{len(bad)} clip(s) not speech-like" + "".join(f"\n  {b}" for b in bad))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
