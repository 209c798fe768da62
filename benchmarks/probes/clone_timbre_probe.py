"""Probe: does matching a clone's long-term spectrum to its reference clip move the cloning scores? CPU only.

    .venv/bin/python benchmarks/probes/clone_timbre_probe.py --corpus /work/corpus-v3b --clone-refs /work/eval-voices \
        --alpha 0 --alpha 0.5 --alpha 1 [--clip 1.0] --out benchmarks/results/quality/v81/clone_timbre_probe.json

The cloning test of `rtvox eval --clone` (same references, 3 en + 3 zh dev sentences, GE2E cosine to the
reference and closer-than-any-built-in), with one change: each reference's mel bias — the mean log-mel of its
speech frames minus the mean of the model's own renderings of four calibration sentences (not eval sentences)
with that reference's embedding, optionally clipped to ±`--clip` nats per band — is added, times `--alpha`, to
every decoded mel before the vocoder (monkeypatched at `steps.tilt_mel`, eager backend). Nothing ships with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.audio.loudness import trim_silence
from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.cloning import Reference, corpus_references, folder_references
from rtvox.eval.metrics import ErrorCounts, score
from rtvox.runtime import steps
from rtvox.runtime.synthesizer import Synthesizer

ROOT = Path(__file__).resolve().parents[2]
CALIBRATION = (
    "The weather was calm, so we walked to the harbour and back before lunch.",
    "She kept every letter in a wooden box under her bed.",
    "周末我们去公园散步，看见很多人在湖边钓鱼。",
    "这家小店的面条又便宜又好吃，每天中午都排长队。",
)
_bias: dict[str, np.ndarray | None] = {"mel": None}
_tilt_mel = steps.tilt_mel


def _biased_tilt_mel(mel: torch.Tensor, tilt: float) -> torch.Tensor:
    out = _tilt_mel(mel, tilt)
    if _bias["mel"] is not None:
        out = out + torch.as_tensor(_bias["mel"], dtype=mel.dtype)[:, None]
    return out


def speech_mel_mean(synth: Synthesizer, audio: np.ndarray) -> np.ndarray:
    """Mean log-mel [n_mels] over the frames of the trimmed clip louder than its 30th percentile."""
    speech = np.ascontiguousarray(trim_silence(audio, SAMPLE_RATE), dtype=np.float32)
    with torch.inference_mode():
        mel = synth._mel(torch.from_numpy(speech)[None])[0]
    level = mel.mean(0)
    return mel[:, level > torch.quantile(level, 0.3)].mean(1).numpy()


def add_cloning_args(p: argparse.ArgumentParser) -> None:
    """--model, --corpus and --clone-refs: what `cloning_setup` needs."""
    p.add_argument("--model", default="models/rtvox-small")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--clone-refs", type=Path, required=True)


def cloning_setup(synth: Synthesizer, corpus: Path, clone_refs: Path) -> tuple[list[Reference], list[str], np.ndarray]:
    """The cloning test's references, its 3 en + 3 zh dev sentences and the built-in voices' embeddings [V, 256]."""
    refs = corpus_references(corpus) + folder_references(clone_refs)
    eval_dir = ROOT.parent / "shared" / "eval"
    sentences = [
        s
        for lang in ("en", "zh")
        for s in [t for t in (eval_dir / f"sentences_{lang}.txt").read_text("utf-8").splitlines() if t.strip()][:3]
    ]
    table = np.stack([synth.voices.get(n).embedding for n in synth.voices.builtin_names])
    return refs, sentences, table


def score_trial(synth: Synthesizer, audio: np.ndarray, reference: np.ndarray, table: np.ndarray) -> tuple[float, float]:
    """(GE2E cosine of the output's speech to the reference embedding, 1.0 if closer to it than any built-in)."""
    speech = trim_silence(audio, SAMPLE_RATE)
    out = synth.speaker_encoder.embed_reference(speech if speech.size else audio, SAMPLE_RATE)
    cosine = float(out @ reference)
    return cosine, float(cosine > float(np.max(table @ out)))


def score_variant(
    synth: Synthesizer,
    sentences: list[str],
    embedding: np.ndarray,
    reference: np.ndarray,
    table: np.ndarray,
    into: dict[str, list[float]],
) -> float:
    """Speak every sentence conditioned on `embedding`, score each against `reference` (appended to `into`'s
    "cosine" and "closer" lists) and return this variant's mean cosine."""
    cosines = []
    for text in sentences:
        cosine, closer = score_trial(synth, synth.synthesize(text, speaker_embedding=embedding).audio, reference, table)
        into["cosine"].append(cosine)
        into["closer"].append(closer)
        cosines.append(cosine)
    return round(float(np.mean(cosines)), 4)


def summarize(scores: dict[Any, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per variant: the mean cosine and the closer-than-any-built-in share over its trials."""
    return {
        str(k): {
            "mean_cosine": round(float(np.mean(s["cosine"])), 4),
            "closer_share": round(float(np.mean(s["closer"])), 4),
        }
        for k, s in scores.items()
    }


def report(
    out: Path | None, header: dict[str, Any], scores: dict[Any, dict[str, list[float]]], per_ref: list[Any]
) -> None:
    """Print the summary; with `out`, write header + summary + per-reference rows as JSON."""
    summary = summarize(scores)
    print(summary)
    if out:
        result = header | {"summary": summary, "per_reference": per_ref}
        out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cloning_args(p)
    p.add_argument("--alpha", type=float, action="append")
    p.add_argument("--clip", type=float, default=None, help="clip the bias to ±CLIP nats per band")
    p.add_argument("--zero-mean", action="store_true", help="remove the bias's mean over bands (no level change)")
    p.add_argument("--per-language", action="store_true", help="one bias per language (its 2 calibration sentences)")
    p.add_argument("--asr", action="store_true", help="also score every output with Whisper base (WER en, CER zh)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    steps.tilt_mel = _biased_tilt_mel
    synth = Synthesizer(args.model, device="cpu")
    refs, sentences, table = cloning_setup(synth, args.corpus, args.clone_refs)
    alphas = args.alpha or [0.0, 1.0]
    scores: dict[float, dict[str, list[float]]] = {a: {"cosine": [], "closer": []} for a in alphas}
    per_ref = []
    judge = WhisperJudge() if args.asr else None
    errors = {a: {"en": ErrorCounts(), "zh": ErrorCounts()} for a in alphas}
    for ref in refs:
        emb = synth.embed_speaker(ref.wav_bytes())
        _bias["mel"] = None
        means = [speech_mel_mean(synth, synth.synthesize(t, speaker_embedding=emb).audio) for t in CALIBRATION]
        groups = {"en": means[:2], "zh": means[2:]} if args.per_language else {"en": means, "zh": means}
        biases = {}
        for lang, own in groups.items():
            bias = speech_mel_mean(synth, ref.audio) - np.mean(own, 0)
            if args.zero_mean:
                bias = bias - bias.mean()
            if args.clip is not None:
                bias = np.clip(bias, -args.clip, args.clip)
            biases[lang] = bias
        row: dict[str, object] = {"reference": ref.name, "bias_min": round(float(biases["en"].min()), 3)}
        row["bias_max"] = round(float(biases["en"].max()), 3)
        for alpha in alphas:
            for lang, group in (("en", sentences[:3]), ("zh", sentences[3:])):
                _bias["mel"] = alpha * biases[lang]
                mean = score_variant(synth, group, emb, emb, table, scores[alpha])
                row[f"alpha_{alpha}_{lang}"] = mean
            if judge is not None:
                for text in sentences:
                    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"
                    _bias["mel"] = alpha * biases[lang]
                    audio = synth.synthesize(text, speaker_embedding=emb).audio
                    heard = judge.transcribe(audio, SAMPLE_RATE, language=lang).text
                    errors[alpha][lang] += next(iter(score(text, heard, lang).values()))
        per_ref.append(row)
        print(row, flush=True)
    header = {"model": args.model, "clip": args.clip, "trials_per_alpha": len(refs) * len(sentences)}
    if judge is not None:  # pooled over every reference's outputs: WER of the English ones, CER of the Mandarin
        header["asr"] = {str(a): {k: round(100 * c.rate, 2) for k, c in e.items()} for a, e in errors.items()}
        print(header["asr"])
    report(args.out, header, scores, per_ref)


if __name__ == "__main__":
    main()
