"""CLI of the evaluation: `rtvox eval` and `rtvox train emotion-judge`. Thin: parse flags, call the library.

Nothing heavy is imported until a command runs, so `rtvox --help` stays fast where the eval extra is absent.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from rtvox.cli_errors import check_output_path, one_message, probe_writable
from rtvox.constants import DEFAULT_MODEL, EVAL_EMOTION_SENTENCES
from rtvox.errors import InputError, ModelError


def eval_command(
    model: Annotated[
        str | None, typer.Option(help="Model directory or shipped model name (default: the shipped default)")
    ] = None,
    sets: Annotated[str, typer.Option(help="Sentence sets: en,zh,mixed (shared/eval) or LANG=FILE items")] = (
        "en,zh,mixed"
    ),
    out: Annotated[Path, typer.Option(help="Results JSON; the markdown table goes beside it (.md)")] = Path(
        "results.json"
    ),
    limit: Annotated[int | None, typer.Option(min=1, help="First N sentences of each set")] = None,
    clone: Annotated[bool, typer.Option("--clone", help="Cloning test on voices outside the training data")] = False,
    emotion: Annotated[bool, typer.Option("--emotion", help="Emotion accuracy with the held-out judge")] = False,
    emotion_sentences: Annotated[
        int, typer.Option(min=1, help="Sentences per language for --emotion (per voice, per emotion)")
    ] = EVAL_EMOTION_SENTENCES,
    duration: Annotated[bool, typer.Option("--duration", help="Exact-duration error, 0.7x-1.4x")] = False,
    voice: Annotated[str | None, typer.Option(help="Voice for intelligibility (default: the model's)")] = None,
    audio_dir: Annotated[
        Path | None, typer.Option(help="Score audio made elsewhere (manifest.jsonl of set/text/path) instead")
    ] = None,
    corpus: Annotated[Path | None, typer.Option(help="Teacher corpus: held-out speakers' reference clips")] = None,
    clone_refs: Annotated[list[Path] | None, typer.Option(help="Folder of extra reference clips (repeatable)")] = None,
    judge: Annotated[Path | None, typer.Option(help="Emotion judge folder (default models/eval-emotion)")] = None,
    eval_dir: Annotated[Path | None, typer.Option(help="Folder of sentences_<lang>.txt (default shared/eval)")] = None,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for the model and Whisper")] = 2,
    keep_audio: Annotated[Path | None, typer.Option(help="Write the rendered clips here")] = None,
    backend: Annotated[str, typer.Option(help="Engine backend the model runs on (CPU): eager, onnx, auto, ...")] = (
        "eager"
    ),
) -> None:
    """Measure quality: Whisper-base WER/CER, cloning similarity, emotion accuracy, duration error."""
    from rtvox.eval.intelligibility import parse_sets
    from rtvox.eval.runner import EvalOptions, run_eval, write_results

    with one_message():
        check_output_path(out, make_folder=True)  # before minutes of rendering and scoring, not after
        if keep_audio is not None:
            check_keep_audio(keep_audio)
        loaded_judge = None
        if emotion:  # the judge too: a wrong --judge folder is bad input, found before the scoring
            from rtvox.eval.emotion_judge import EmotionJudge

            try:
                loaded_judge = EmotionJudge.load(judge)
            except ModelError as exc:
                raise InputError(str(exc), param="judge") from None
        if audio_dir is None and model is None:
            model = DEFAULT_MODEL
        options = EvalOptions(
            sets=parse_sets(sets, eval_dir, limit),
            model=Path(model) if model else None,
            audio_dir=audio_dir,
            voice=voice,
            clone=clone,
            emotion=emotion,
            emotion_sentences=emotion_sentences,
            duration=duration,
            corpus=corpus,
            clone_refs=list(clone_refs or ()),
            judge_dir=judge,
            threads=threads,
            keep_audio=keep_audio,
            backend=backend,
            command=shlex.join(["rtvox", *sys.argv[1:]]),
            judge=loaded_judge,
        )
        if clone and corpus is None and not clone_refs:
            raise InputError("--clone needs reference clips: pass --corpus DIR and/or --clone-refs DIR")
        if clone:  # before minutes of rendering: a wrong folder or unusable clips fail now
            from rtvox.eval.cloning import gather_references

            options.references = gather_references(corpus, list(clone_refs or ()))
        results = run_eval(options)
        md = write_results(results, out)
    typer.echo(md.read_text(encoding="utf-8"))
    typer.echo(f"wrote {out} and {md}", err=True)


def check_keep_audio(folder: Path) -> None:
    """InputError unless --keep-audio FOLDER is a folder, or can be made in a writable one: found before the model
    loads, not when the first clip is written. Nothing is created here (a failed eval leaves no empty folder)."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--keep-audio {folder} is a file; give a folder for the clips", param="keep_audio")
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # the root always exists
    if not existing.is_dir():
        message = f"--keep-audio {folder}: {existing} is a file, not a folder; give a folder for the clips"
        raise InputError(message, param="keep_audio")
    try:
        probe_writable(existing)
    except OSError as exc:
        message = f"--keep-audio {folder}: cannot write into {existing}: {exc.strerror or exc}"
        raise InputError(message, param="keep_audio") from None


def train_emotion_judge_command(
    corpus: Annotated[Path, typer.Option(help="Teacher corpus folder (manifest.jsonl + wavs)")],
    out: Annotated[Path, typer.Option(help="Where the judge is written")] = Path("models/eval-emotion"),
    features: Annotated[
        Path | None, typer.Option(help="Feature cache (.npz): reused if present, else computed and saved")
    ] = None,
    max_neutral: Annotated[int, typer.Option(help="Neutral clips sampled per training speaker")] = 30,
    max_other: Annotated[int, typer.Option(help="Clips sampled per training speaker and other emotion")] = 14,
    jobs: Annotated[int, typer.Option(help="Processes measuring features")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Train the held-out emotion judge on teacher-corpus prosody (never on a model's output)."""
    import json

    from rtvox.eval.emotion_judge import train_judge
    from rtvox.eval.judge_data import CorpusFeatures, extract_corpus_features

    if not (corpus / "manifest.jsonl").is_file():
        with one_message():
            raise InputError(f"{corpus} has no manifest.jsonl; pass --corpus pointing at a built corpus")
    if features is not None and features.is_file():
        data = CorpusFeatures.load(features)
    else:
        data = extract_corpus_features(corpus, max_neutral=max_neutral, max_other=max_other, seed=seed, jobs=jobs)
        if features is not None:
            data.save(features)
    judge = train_judge(data, seed=seed)
    judge.info["command"] = shlex.join(["rtvox", *sys.argv[1:]])
    judge.info["sampling"] = {"max_neutral": max_neutral, "max_other": max_other, "seed": seed}
    judge.save(out)
    typer.echo(json.dumps(judge.info["accuracy"], indent=2))


def register(app: typer.Typer, train_app: typer.Typer) -> None:
    """Add `eval` to the main CLI and `emotion-judge` to `rtvox train`."""
    app.command("eval")(eval_command)
    train_app.command("emotion-judge")(train_emotion_judge_command)
