"""Probe: would a final pitch rise make "surprised" recognizable inside the trained pitch range? CPU, the eval's
emotion measurement (5 emotions, dev sentences, voices mei + jun, Whisper on mei's renderings).

    .venv/bin/python benchmarks/probes/final_rise_probe.py [--model models/rtvox-small] --rise 0 --rise 1.5

The training data's surprised clips end rising (final F0 slope +0.085 log-Hz over the last third against happy's
−0.073; config `emotion_prosody.source.data_prosody`), while 8.1.0's renderings of both end flat (+0.03 / +0.02),
and the judge hears 14 of 24 surprised clips as happy. For each `--rise` R, every phoneme pitch (speaker z) of a
surprised request gets a ramp from 0 at two thirds of each chunk's phonemes to R at its last one, clamped again
to the model's `pitch_bounds`. Monkeypatched for this probe only (on each chunk, not only a request's last one);
nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from rtvox.eval.asr import WhisperJudge
from rtvox.eval.emotion_judge import EmotionJudge
from rtvox.eval.expressive import evaluate_emotion
from rtvox.runtime.synthesizer import Synthesizer

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=ROOT / "models" / "rtvox-small")
    p.add_argument("--rise", type=float, action="append", default=None)
    p.add_argument("--sentences", type=int, default=6)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    eval_dir = next(d for d in (ROOT / "shared" / "eval", ROOT.parent / "shared" / "eval") if d.is_dir())
    material = {
        lang: [ln.strip() for ln in (eval_dir / f"sentences_{lang}.txt").read_text("utf-8").splitlines() if ln.strip()][
            : args.sentences
        ]
        for lang in ("en", "zh")
    }
    synth = Synthesizer(args.model, device="cpu", backend="eager")
    adaptor = synth.bundle.acoustic.variance
    low, high = adaptor.pitch_bounds or (float("-inf"), float("inf"))
    embed = adaptor.pitch_embed
    plain = embed.forward
    state: dict[str, Any] = {"rise": 0.0, "surprised": False}

    def forward(value: torch.Tensor, mask: torch.Tensor) -> Any:
        if state["surprised"] and state["rise"]:
            n = mask.sum(1, keepdim=True).float()  # [B, 1] phonemes per row
            i = torch.arange(value.shape[1], dtype=value.dtype)[None, :]
            start = n * 2 / 3
            ramp = ((i - start) / (n - 1 - start).clamp_min(1.0)).clamp(0.0, 1.0) * state["rise"]
            value = (value + ramp).clamp(low, high)
        return plain(value, mask)

    embed.forward = forward  # type: ignore[method-assign]
    synthesize = synth.synthesize

    def tagged(text: str, **kwargs: Any) -> Any:
        state["surprised"] = kwargs.get("emotion") == "surprised"
        return synthesize(text, **kwargs)

    synth.synthesize = tagged  # type: ignore[method-assign]
    judge = EmotionJudge.load()
    asr = WhisperJudge(threads=2)
    voices = ["mei", "jun"]
    report = {}
    for rise in args.rise or [0.0, 1.5]:
        state["rise"] = rise
        r = evaluate_emotion(synth, judge, material, voices=voices, asr=asr)
        keep = ("accuracy", "per_emotion_accuracy", "confusion", "error_rate_by_emotion", "max_delta_vs_neutral")
        report[str(rise)] = {k: r.get(k) for k in keep}
        print(f"rise {rise}: accuracy {r['accuracy']} surprised {r['per_emotion_accuracy']['surprised']} "
              f"confusion {r['confusion']['surprised']} errors {r['error_rate_by_emotion'].get('surprised')} "
              f"max delta {r.get('max_delta_vs_neutral')}", flush=True)  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
