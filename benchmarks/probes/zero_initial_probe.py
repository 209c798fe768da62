"""Probe: does the default model voice a chunk that starts with a vowel (a zero-initial syllable)? CPU only.

    .venv/bin/python benchmarks/probes/zero_initial_probe.py --out benchmarks/results/quality/zero_initial_probe.json

Speaks each text with the default voice (eager, CPU, natural length) and reports, per text: the audio's length,
the share of 10-ms frames above -34 dBFS RMS, the first sounding phoneme, its frames and the RMS level of the
audio over them, and what Whisper base (beam 5, as `rtvox eval`, 0.33 s of silence on each side) hears.
Nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisResult

TEXTS: tuple[tuple[str, str], ...] = (
    ("啊", "zh"),
    ("二", "zh"),
    ("一", "zh"),
    ("五", "zh"),
    ("好", "zh"),
    ("是", "zh"),
    ("啊，今天天气真好。", "zh"),
    ("一个人去看电影。", "zh"),
    ("爱是一种力量。", "zh"),
    ("他说今天天气真好。", "zh"),
    ("Oh!", "en"),
    ("a", "en"),
    ("Yes.", "en"),
    ("Apples are red.", "en"),
    ("Every day is a new day.", "en"),
    ("Only one more.", "en"),
    ("The apples are red.", "en"),
)


def first_slot(result: SynthesisResult, wav: np.ndarray) -> tuple[str, int, float]:
    """The first chunk's first sounding phoneme, its frames and the audio's RMS level over them (dBFS)."""
    chunk = result.chunks[0]
    spoken = [(p, d) for p, d in zip(chunk.phonemes, chunk.durations, strict=True) if d > 0]
    first, frames = spoken[0] if spoken else ("", 0)
    span = wav[: frames * HOP_LENGTH]
    dbfs = float(20 * np.log10(np.sqrt(np.mean(span**2)) + 1e-9)) if span.size else float("-inf")
    return first, frames, dbfs


def hear(judge: WhisperJudge, wav: np.ndarray, lang: str) -> str:
    """What Whisper hears, with 0.33 s of silence on each side (as `rtvox eval`)."""
    pad = np.zeros(SAMPLE_RATE // 3, np.float32)
    return judge.transcribe(np.concatenate([pad, wav, pad]), SAMPLE_RATE, lang).text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    synth = Synthesizer(device="cpu")
    judge = WhisperJudge()
    rows = []
    for text, lang in TEXTS:
        result = synth.synthesize(text)
        wav = np.asarray(result.audio, dtype=np.float32)
        frames = wav[: wav.shape[0] // 240 * 240].reshape(-1, 240)
        active = float((np.sqrt((frames**2).mean(1)) > 0.02).mean()) if frames.size else 0.0
        first, first_frames, first_dbfs = first_slot(result, wav)
        heard = hear(judge, wav, lang)
        row = {
            "text": text,
            "seconds": round(wav.shape[0] / SAMPLE_RATE, 3),
            "active_share": round(active, 2),
            "first_phoneme": first,
            "first_frames": first_frames,
            "first_dbfs": round(first_dbfs, 1),
            "heard": heard,
        }
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"model": synth.bundle.config.version, "rows": rows}
    args.out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
