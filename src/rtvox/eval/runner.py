"""`rtvox eval`: runs the requested measurements on a model (or on audio made elsewhere) and writes JSON plus a
markdown table beside it.

Intelligibility always runs; --clone, --emotion and --duration add the other measurements. Sentence counts for
the slower parts are capped (EMOTION_SENTENCES, CLONE_SENTENCES, DURATION_SENTENCES per language) so a full run
stays within about 15 minutes on two CPU cores.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtvox.constants import EVAL_EMOTION_SENTENCES, SAMPLE_RATE, SPOKEN_LANGS
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import Renderer, SentenceSet, audio_dir_renderer, evaluate_set
from rtvox.eval.report import markdown_report

EMOTION_SENTENCES = EVAL_EMOTION_SENTENCES  # per language (en, zh), per voice: EvalOptions.emotion_sentences' default
EMOTION_VOICES = 2  # the default voice and the first built-in of the other gender
CLONE_SENTENCES = 3  # per language (en, zh), per reference
DURATION_SENTENCES = 3  # per language (en, zh)


@dataclass
class EvalOptions:
    """What to measure and where the inputs are; every path is explicit so a run can be repeated."""

    sets: list[SentenceSet]
    model: Path | None = None  # model directory; None with audio_dir set
    audio_dir: Path | None = None  # score pre-rendered audio (teachers) instead of a model
    voice: str | None = None  # voice for intelligibility; None: the model's default
    clone: bool = False
    emotion: bool = False
    emotion_sentences: int = EMOTION_SENTENCES  # per language; more narrows the error-rate-by-emotion check
    duration: bool = False
    corpus: Path | None = None  # teacher corpus, for the held-out cloning references
    clone_refs: list[Path] = field(default_factory=list)  # folders of extra reference clips (wav, flac, mp3...)
    judge_dir: Path | None = None  # emotion judge weights (default models/eval-emotion)
    threads: int = 2
    keep_audio: Path | None = None  # write every rendered clip here
    backend: str = "eager"  # engine backend of the model (rtvox.engines; "auto" = what serving picks)
    command: str = ""  # the command line, recorded in the results
    # already loaded by the caller's upfront checks (rtvox eval), so they are not read twice; None: load here
    judge: Any = None  # the EmotionJudge of judge_dir
    references: Any = None  # gather_references(corpus, clone_refs)'s (references, skipped)


def machine() -> str:
    cpus = os.cpu_count() or 0
    return f"{platform.machine()} {platform.system()} {cpus} CPU(s), Python {platform.python_version()}"


def _model_renderer(synth: Any, voice: str | None) -> Renderer:
    def render(lang: str, text: str) -> tuple[Any, int]:
        return synth.synthesize(text, voice=voice).audio, SAMPLE_RATE

    return render


def _by_lang(sets: list[SentenceSet], cap: int) -> dict[str, list[str]]:
    """First `cap` sentences of the first en and the first zh set (the emotion, cloning and duration tests'
    material; later sets of a language are scored for intelligibility only)."""
    out: dict[str, list[str]] = {}
    for s in sets:
        if s.lang in SPOKEN_LANGS and s.lang not in out:
            out[s.lang] = list(s.sentences[:cap])
    return out


def _other_gender_voice(synth: Any, default: str) -> list[str]:
    voices = [default]
    gender = synth.voices.get(default).gender
    for name in synth.voices.builtin_names:
        if name != default and synth.voices.get(name).gender != gender:
            voices.append(name)
            break
    return voices[:EMOTION_VOICES]


def run_eval(options: EvalOptions) -> dict[str, Any]:
    """All requested measurements as one JSON-ready dict."""
    started = time.perf_counter()
    torch_threads(options.threads)
    asr = WhisperJudge(threads=options.threads)
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "command": options.command,
        "asr": {"model": "whisper-base (CTranslate2)", "compute_type": "int8", "beam_size": asr.beam_size},
    }
    synth = None
    if options.audio_dir is not None:
        render, available = audio_dir_renderer(options.audio_dir)
        sets = [available[s.lang] for s in options.sets if s.lang in available]
        results["audio_dir"] = str(options.audio_dir)
    else:
        from rtvox.runtime.synthesizer import Synthesizer

        synth = Synthesizer(options.model, device="cpu", backend=options.backend)
        voice = options.voice or synth.default_voice
        render, sets = _model_renderer(synth, voice), options.sets
        results["model"] = str(synth.model_dir)
        results["voice"] = voice
        results["backend"] = options.backend
    results["sets"] = {}
    for index, sentence_set in enumerate(sets):
        # a language's first set is keyed by the language, later ones by LANG=FILE (their clips in asr/set<index>),
        # so none overwrites another
        first = sentence_set.lang not in results["sets"]
        key = sentence_set.lang if first else f"{sentence_set.lang}={sentence_set.path}"
        keep = None
        if options.keep_audio:
            keep = options.keep_audio / "asr" if first else options.keep_audio / "asr" / f"set{index}"
        results["sets"][key] = evaluate_set(sentence_set, render, asr, keep_audio=keep)
        summary = results["sets"][key]["summary"]
        summary["path"] = str(sentence_set.path)
        log(f"{key}: {summary['primary']} {summary['metrics'][summary['primary']]['rate']:.3f}")
    if synth is not None:
        _model_only(synth, options, asr, results)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    return results


def _model_only(synth: Any, options: EvalOptions, asr: WhisperJudge, results: dict[str, Any]) -> None:
    """Cloning, emotion and duration: measurements that need a model to ask for things."""
    from rtvox.eval.cloning import evaluate_cloning, gather_references, teacher_similarity
    from rtvox.eval.emotion_judge import EmotionJudge
    from rtvox.eval.expressive import evaluate_duration, evaluate_emotion

    voice = results["voice"]
    if options.clone:
        t0 = time.perf_counter()
        refs, skipped = options.references or gather_references(options.corpus, options.clone_refs)
        for item in skipped:
            log(f"clone: skipped {item['file']}: {item['reason']}")
        sentences = [t for texts in _by_lang(options.sets, CLONE_SENTENCES).values() for t in texts]
        results["clone"] = evaluate_cloning(synth, refs, sentences)
        results["clone"]["skipped_references"] = skipped
        if options.corpus is not None:
            builtins = {name: synth.voices.get(name).embedding for name in synth.voices.builtin_names}
            results["clone"]["teacher_ceiling"] = teacher_similarity(options.corpus, builtins)
        results["clone"]["wall_s"] = round(time.perf_counter() - t0, 1)
        log(f"clone: mean cosine {results['clone']['mean_cosine']} ({results['clone']['wall_s']} s)")
    if options.emotion:
        t0 = time.perf_counter()
        judge = options.judge if options.judge is not None else EmotionJudge.load(options.judge_dir)
        voices = _other_gender_voice(synth, voice)
        material = _by_lang(options.sets, options.emotion_sentences)
        results["emotion"] = evaluate_emotion(synth, judge, material, voices=voices, asr=asr)
        results["emotion"]["wall_s"] = round(time.perf_counter() - t0, 1)
        log(f"emotion: accuracy {results['emotion']['accuracy']} ({results['emotion']['wall_s']} s)")
    if options.duration:
        t0 = time.perf_counter()
        sentences = [t for texts in _by_lang(options.sets, DURATION_SENTENCES).values() for t in texts]
        results["duration"] = evaluate_duration(synth, sentences, voice=voice)
        results["duration"]["wall_s"] = round(time.perf_counter() - t0, 1)
        log(f"duration: mean error {results['duration']['mean_error']} ({results['duration']['wall_s']} s)")


def log(message: str) -> None:
    """Progress on stderr (stdout carries the markdown report)."""
    print(f"[eval] {message}", file=sys.stderr, flush=True)


def torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


def write_results(results: dict[str, Any], out: Path) -> Path:
    """Write results JSON to `out` and the markdown table to the same name with .md; returns the .md path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    md = out.with_suffix(".md")
    md.write_text(markdown_report(results), encoding="utf-8")
    return md
