"""Intelligibility: sentence sets, rendering them (a model, or audio made elsewhere), ASR, error rates.

A sentence set is a language (en, zh, mixed) and a UTF-8 file with one sentence per line (blank lines and lines
starting with '#' are skipped). The dev sets live in shared/eval as sentences_<lang>.txt; `parse_sets` also
takes `lang=path` to score another file in that language.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from rtvox.errors import InputError
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.metrics import LANGS, ErrorCounts, primary_metric, score

BOOTSTRAP_DRAWS = 2000  # resamples per bootstrap interval (here and in rtvox.eval.expressive)

EVAL_DIR_ENV = "RTVOX_EVAL_DIR"
# Whisper decoding language per set: a mixed sentence is decoded as Chinese (English words stay in Latin).
ASR_LANGUAGE = {"en": "en", "zh": "zh", "mixed": "zh"}

Renderer = Callable[[str, str], tuple[np.ndarray, int]]  # (set language, sentence) -> (audio, sample rate)


def default_eval_dir() -> Path:
    """$RTVOX_EVAL_DIR, else the shared/eval folder beside the repository."""
    if env := os.environ.get(EVAL_DIR_ENV):
        return Path(env)
    return Path(__file__).resolve().parents[4] / "shared" / "eval"


@dataclass(frozen=True)
class SentenceSet:
    """Sentences of one language to be spoken and transcribed."""

    lang: str  # en | zh | mixed: picks the metric and the ASR language
    path: Path
    sentences: tuple[str, ...]


def read_sentences(path: Path) -> tuple[str, ...]:
    """The sentences of a set file (UTF-8, one a line, # comments); InputError naming the file if it cannot be
    read as that."""
    from rtvox.fsutil import read_user_text

    lines = read_user_text(path, "sentence file").splitlines()
    sentences = tuple(s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#"))
    if not sentences:
        raise InputError(f"sentence file {path} has no sentences")
    return sentences


def parse_sets(spec: str, eval_dir: Path | None = None, limit: int | None = None) -> list[SentenceSet]:
    """'en,zh,mixed' (dev files) or items like 'en=/path/to/file.txt'; `limit` keeps the first N of each."""
    folder = eval_dir or default_eval_dir()
    sets = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        lang, _, file = item.partition("=")
        if lang not in LANGS:
            raise InputError(f"unknown sentence set {lang!r}; use {', '.join(LANGS)} or LANG=FILE")
        path = Path(file) if file else folder / f"sentences_{lang}.txt"
        sentences = read_sentences(path)
        sets.append(SentenceSet(lang, path, sentences[:limit] if limit else sentences))
    if not sets:
        raise InputError("no sentence set given; use --sets en,zh,mixed")
    return sets


def counts_to_dict(counts: ErrorCounts) -> dict[str, Any]:
    return {
        "rate": round(counts.rate, 4),
        "errors": counts.errors,
        "substitutions": counts.substitutions,
        "deletions": counts.deletions,
        "insertions": counts.insertions,
        "reference_length": counts.reference_length,
    }


def bootstrap_rates(sides: list[list[tuple[int, int]]], *, draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> np.ndarray:
    """[draws, len(sides)] pooled error rates (Σ errors / Σ reference tokens) of sentence resamples: each draw
    picks sentence indices with replacement, the same ones on every side (paired). Seeded, so a result file can
    be recomputed exactly."""
    if not sides or not sides[0] or any(len(side) != len(sides[0]) for side in sides):
        raise ValueError(f"need the same sentences on every side, got {[len(side) for side in sides]}")
    picks = np.random.default_rng(seed).integers(0, len(sides[0]), size=(draws, len(sides[0])))
    rates = []
    for side in sides:
        sums = np.asarray(side, dtype=np.float64)[picks].sum(1)  # [draws, 2]: errors, reference tokens
        rates.append(sums[:, 0] / np.maximum(sums[:, 1], 1))
    return np.stack(rates, axis=1)


def rate_interval(counts: list[tuple[int, int]]) -> tuple[float, float]:
    """95 % bootstrap interval of a set's pooled error rate from its sentences' (errors, reference tokens): how
    far 20 sentences let two runs' figures differ by chance."""
    low, high = np.percentile(bootstrap_rates([counts])[:, 0], [2.5, 97.5])
    return float(low), float(high)


def summarize(lang: str, items: list[dict[str, Any]], pooled: dict[str, ErrorCounts]) -> dict[str, Any]:
    """Pooled (Σ errors / Σ reference tokens) rates with their 95 % bootstrap interval, and per-sentence mean
    rates, of one set."""
    metrics = {}
    for name, total in pooled.items():
        rates = [item["metrics"][name]["rate"] for item in items]
        counts = [(item["metrics"][name]["errors"], item["metrics"][name]["reference_length"]) for item in items]
        low, high = rate_interval(counts)
        metrics[name] = {
            **counts_to_dict(total),
            "mean_sentence_rate": round(float(np.mean(rates)), 4),
            "ci95": [round(low, 4), round(high, 4)],
        }
    seconds = sum(item["seconds"] for item in items)
    return {
        "lang": lang,
        "primary": primary_metric(lang),
        "n": len(items),
        "audio_seconds": round(seconds, 2),
        "metrics": metrics,
    }


def evaluate_set(
    sentence_set: SentenceSet, render: Renderer, judge: WhisperJudge, *, keep_audio: Path | None = None
) -> dict[str, Any]:
    """Render and transcribe every sentence; per-sentence records plus the set summary."""
    items: list[dict[str, Any]] = []
    pooled: dict[str, ErrorCounts] = {}
    render_s = asr_s = 0.0
    for index, text in enumerate(sentence_set.sentences):
        t0 = time.perf_counter()
        audio, sr = render(sentence_set.lang, text)
        t1 = time.perf_counter()
        heard = judge.transcribe(audio, sr, ASR_LANGUAGE[sentence_set.lang])
        asr_s += time.perf_counter() - t1
        render_s += t1 - t0
        counts = score(text, heard.text, sentence_set.lang)
        for name, c in counts.items():
            pooled[name] = pooled.get(name, ErrorCounts()) + c
        if keep_audio is not None:
            keep_audio.mkdir(parents=True, exist_ok=True)
            sf.write(keep_audio / f"{sentence_set.lang}-{index:03d}.wav", audio, sr)
        items.append(
            {
                "text": text,
                "hypothesis": heard.text,
                "seconds": round(heard.seconds, 3),
                "metrics": {name: counts_to_dict(c) for name, c in counts.items()},
            }
        )
    summary = summarize(sentence_set.lang, items, pooled)
    summary["timing_s"] = {"render": round(render_s, 2), "asr": round(asr_s, 2)}
    return {"summary": summary, "items": items}


def audio_dir_renderer(folder: Path) -> tuple[Renderer, dict[str, SentenceSet]]:
    """Score audio made elsewhere (teachers): `folder/manifest.jsonl` lines {"set", "text", "path"}.

    Returns a renderer that reads the clip of a (set, sentence) pair and the sets the folder holds.
    """
    manifest = folder / "manifest.jsonl"
    if not manifest.is_file():
        raise InputError(f"{manifest} is missing; an audio folder needs manifest.jsonl lines {{set, text, path}}")
    clips: dict[tuple[str, str], Path] = {}
    by_set: dict[str, list[str]] = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["set"] not in LANGS:
            raise InputError(f"{manifest}: unknown set {row['set']!r}")
        clips[(row["set"], row["text"])] = folder / row["path"]
        by_set.setdefault(row["set"], []).append(row["text"])

    def render(lang: str, text: str) -> tuple[np.ndarray, int]:
        audio, sr = sf.read(clips[(lang, text)], dtype="float32", always_2d=True)
        return audio.mean(1), int(sr)

    sets = {lang: SentenceSet(lang, manifest, tuple(texts)) for lang, texts in by_set.items()}
    return render, sets
