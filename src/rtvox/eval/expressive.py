"""Emotion and duration control of a model: the held-out emotion judge's accuracy on the model's output, the
intelligibility cost of each emotion, and the exact-duration error.

Emotion: each voice speaks each sentence neutrally and in every requested emotion; the judge reads each
emotional clip's prosody relative to the mean of that voice's neutral renderings in the same language (the
baseline the judge was trained with) and names one of the five basic emotions. Duration: each sentence is
spoken at its natural length, then with `duration=` set to 0.7x-1.4x of it; the error is |actual/target - 1|
for the whole output and for the speech span after trimming silence.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from rtvox.audio.loudness import trim_silence
from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.emotion_judge import BASIC_EMOTIONS, EmotionJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE, BOOTSTRAP_DRAWS, bootstrap_rates
from rtvox.eval.metrics import ErrorCounts, primary_metric, score
from rtvox.eval.prosody import ProsodyExtractor, relative

if TYPE_CHECKING:
    from rtvox.runtime.synthesizer import Synthesizer

DURATION_FACTORS = (0.7, 0.85, 1.0, 1.2, 1.4)


def paired_delta_interval(
    emotional: list[tuple[int, int]], neutral: list[tuple[int, int]], *, draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float]:
    """95 % interval of (pooled error rate of `emotional` − that of `neutral`) by a paired bootstrap over
    sentences (`bootstrap_rates`: the same sentences drawn on both sides)."""
    rates = bootstrap_rates([emotional, neutral], draws=draws, seed=seed)
    low, high = np.percentile(rates[:, 0] - rates[:, 1], [2.5, 97.5])
    return float(low), float(high)


def speech_seconds(audio: np.ndarray) -> float:
    """Length of the speech span: first to last non-silent frame, with no margin (a fixed margin would not
    scale with the target and would bias the ratio)."""
    return trim_silence(audio, SAMPLE_RATE, margin_seconds=0.0).shape[0] / SAMPLE_RATE


def duration_error(actual: float, target: float) -> float:
    """|actual / target - 1|: 0.02 means 2 % off the requested length."""
    if target <= 0:
        raise ValueError(f"target length must be positive, got {target}")
    return abs(actual / target - 1.0)


def evaluate_emotion(
    synth: Synthesizer,
    judge: EmotionJudge,
    sentences: dict[str, list[str]],
    *,
    voices: list[str],
    asr: WhisperJudge | None = None,
    emotions: tuple[str, ...] = BASIC_EMOTIONS,
) -> dict[str, Any]:
    """Judge accuracy over voices x languages x sentences x emotions, a confusion table, and (with `asr`) the
    error rate of each emotion's renderings of the first voice."""
    extract = ProsodyExtractor()
    trials: list[dict[str, Any]] = []
    pooled: dict[str, ErrorCounts] = defaultdict(ErrorCounts)
    per_sentence: dict[str, list[tuple[int, int]]] = defaultdict(list)  # (errors, reference tokens) in text order
    for voice in voices:
        for lang, texts in sentences.items():
            absolute: dict[str, list[np.ndarray]] = defaultdict(list)
            for text in texts:
                for emotion in emotions:
                    audio = synth.synthesize(text, voice=voice, emotion=emotion).audio
                    absolute[emotion].append(extract(audio, SAMPLE_RATE, text))
                    if asr is not None and voice == voices[0]:
                        heard = asr.transcribe(audio, SAMPLE_RATE, ASR_LANGUAGE[lang])
                        counts = score(text, heard.text, lang)[primary_metric(lang)]
                        pooled[f"{emotion}/{lang}"] += counts
                        per_sentence[f"{emotion}/{lang}"].append((counts.errors, counts.reference_length))
            baseline = np.mean(absolute["neutral"], axis=0)
            for emotion in emotions:
                rows = relative(np.stack(absolute[emotion]), baseline)
                for text, predicted in zip(texts, judge.predict(rows, emotions), strict=True):
                    trials.append(
                        {"voice": voice, "lang": lang, "text": text, "emotion": emotion, "predicted": predicted}
                    )
    per_emotion = {
        e: round(float(np.mean([t["predicted"] == e for t in trials if t["emotion"] == e])), 4) for e in emotions
    }
    confusion = {e: dict(Counter(t["predicted"] for t in trials if t["emotion"] == e)) for e in emotions}
    result: dict[str, Any] = {
        "labels": list(emotions),
        "voices": voices,
        "trials": len(trials),
        "accuracy": round(float(np.mean([t["predicted"] == t["emotion"] for t in trials])), 4) if trials else None,
        "per_emotion_accuracy": per_emotion,
        "confusion": confusion,
        "judge_heldout_teacher_accuracy": judge.info.get("accuracy", {}).get("heldout_5"),
    }
    if asr is not None:
        error = {key: round(c.rate, 4) for key, c in sorted(pooled.items())}
        deltas = {}
        intervals = {}
        for key, rate in error.items():
            emotion, lang = key.split("/")
            if emotion != "neutral":
                deltas[key] = round(rate - error[f"neutral/{lang}"], 4)
                low, high = paired_delta_interval(per_sentence[key], per_sentence[f"neutral/{lang}"])
                intervals[key] = [round(low, 4), round(high, 4)]
        result["error_rate_by_emotion"] = error
        result["error_rate_delta_vs_neutral"] = deltas
        # how far the sentences alone move each delta: a bound of 3 points is resolved only when this is narrow
        result["error_rate_delta_ci95"] = intervals
        result["error_counts_by_sentence"] = {k: [list(c) for c in rows] for k, rows in sorted(per_sentence.items())}
        result["max_delta_vs_neutral"] = max(deltas.values()) if deltas else None
    result["items"] = trials
    return result


def evaluate_duration(
    synth: Synthesizer, sentences: list[str], *, voice: str | None = None, factors: tuple[float, ...] = DURATION_FACTORS
) -> dict[str, Any]:
    """|actual/target - 1| of whole outputs and of their trimmed speech spans, over sentences x factors."""
    rows = []
    for text in sentences:
        natural = synth.synthesize(text, voice=voice).audio
        natural_s = natural.shape[0] / SAMPLE_RATE
        natural_span_s = speech_seconds(natural)
        for factor in factors:
            target = natural_s * factor
            audio = synth.synthesize(text, voice=voice, duration=target).audio
            actual = audio.shape[0] / SAMPLE_RATE
            span = speech_seconds(audio)
            rows.append(
                {
                    "text": text,
                    "factor": factor,
                    "natural_s": round(natural_s, 4),
                    "target_s": round(target, 4),
                    "actual_s": round(actual, 4),
                    "error": round(duration_error(actual, target), 5),
                    "span_target_s": round(natural_span_s * factor, 4),
                    "span_actual_s": round(span, 4),
                    "span_error": round(duration_error(span, natural_span_s * factor), 5)
                    if natural_span_s > 0
                    else None,
                }
            )
    errors = [r["error"] for r in rows]
    spans = [r["span_error"] for r in rows if r["span_error"] is not None]
    return {
        "factors": list(factors),
        "trials": len(rows),
        "mean_error": round(float(np.mean(errors)), 5) if errors else None,
        "max_error": round(float(np.max(errors)), 5) if errors else None,
        "share_within_2pct": round(float(np.mean([e <= 0.02 for e in errors])), 4) if errors else None,
        "mean_span_error": round(float(np.mean(spans)), 5) if spans else None,
        "max_span_error": round(float(np.max(spans)), 5) if spans else None,
        "span_share_within_2pct": round(float(np.mean([e <= 0.02 for e in spans])), 4) if spans else None,
        "items": rows,
    }
