"""Command line: parses arguments and calls the library. Errors print one clear line and exit non-zero."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from rtvox.cli_errors import check_listen, check_output_path, no_empty_folder_left, one_message
from rtvox.constants import AUDIO_FORMATS, FIRST_CHUNK_PHONEMES, SAMPLE_RATE
from rtvox.errors import InputError, RtvoxError, TextError, VoiceNotFoundError
from rtvox.eval.commands import register as register_eval
from rtvox.training.commands import train_app

app = typer.Typer(add_completion=False, no_args_is_help=True, help="rtvox: fast expressive zh/en text-to-speech")
voices_app = typer.Typer(no_args_is_help=True, help="List, clone and remove voices.")
app.add_typer(voices_app, name="voices")
app.add_typer(train_app, name="train")
register_eval(app, train_app)  # `rtvox eval`, `rtvox train emotion-judge`

T = TypeVar("T")

# Inputs with at least this many characters get a progress bar on stderr.
PROGRESS_MIN_CHARS = 400
# The CLI speaks whole books through `@file`; the HTTP API keeps OpenAI's 4096.
CLI_MAX_CHARS = 1_000_000

TextArg = Annotated[str, typer.Argument(help="Text; '-' reads stdin, '@file' reads a UTF-8 file")]
ModelOpt = Annotated[str | None, typer.Option(help="Model directory or shipped model name")]
DeviceOpt = Annotated[str, typer.Option(help="auto, cpu or cuda")]
LexiconOpt = Annotated[Path | None, typer.Option(help="User lexicon file, TSV or JSON (docs/LEXICON.md)")]


def read_text(text: str) -> str:
    """TEXT as given; '-' reads stdin; '@path' reads a UTF-8 file."""
    if text == "-":
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("standard input is not UTF-8 text") from None
    if text == "@":  # a file name forgotten, not an at-sign to speak
        raise InputError("no file name after @; pass @FILE (or '-' for stdin)")
    if text.startswith("@"):
        from rtvox.fsutil import read_user_text

        return read_user_text(Path(text[1:]), "text file")
    return text


def check_settings(**settings: Any) -> None:
    """The request's own checks on speak's settings, before the model loads (it takes seconds), naming the flag:
    `--emotion-alpha must be a number from 0.0 to 2.0, got nan`."""
    from rtvox.runtime.types import SynthesisRequest

    try:
        SynthesisRequest(text="", **settings)
    except InputError as exc:
        message = str(exc)
        if exc.param not in settings or not message.startswith(exc.param):
            raise
        flag = "--" + exc.param.replace("_", "-")
        raise InputError(flag + message.removeprefix(exc.param), param=exc.param) from None


def output_format(output: Path, fmt: str | None) -> str:
    """The audio format of OUTPUT (--format, else its suffix as the library reads it: .ogg is opus, .raw pcm; no
    suffix: wav), once OUTPUT is known to be a file path that can be written: checked before the model loads, so a
    bad path fails at once instead of after the synthesis."""
    from rtvox.audio.encode import format_from_path

    if fmt is None:
        name = format_from_path(output) if output.suffix else "wav"
    else:
        name = fmt.strip().lower()
        if name not in AUDIO_FORMATS:
            raise InputError(f"unsupported audio format {fmt!r}; use --format {'|'.join(AUDIO_FORMATS)}")
    if str(output) != "-":  # '-': stdout
        check_output_path(output)
    return name


def _run(fn: Callable[[], T]) -> T:
    """Run a command body, turning rtvox errors into one message and an exit code (2: bad input, 1: other)."""
    with one_message():
        return fn()


@app.command()
def phonemize(
    text: TextArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    lexicon: LexiconOpt = None,
) -> None:
    """Normalize text and print its tokens, pinyin, phonemes and chunks."""

    def body() -> None:
        from rtvox.text import Frontend, Lexicon

        frontend = Frontend(lexicon=Lexicon.load(lexicon) if lexicon else None)
        result = frontend.process(read_text(text))
        if as_json:
            typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
            return
        for warning in result.warnings:
            typer.echo(f"warning: not spoken: {warning}", err=True)
        if not result.chunks:
            raise TextError("the text has nothing rtvox can speak; give Chinese or English words", param="text")
        typer.echo(result.normalized)
        for chunk in result.chunks:
            typer.echo(" ".join(chunk.phonemes))

    _run(body)


@app.command()
def speak(
    text: TextArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="Output audio file; '-' writes to stdout")],
    voice: Annotated[str | None, typer.Option(help="Built-in or cloned voice name")] = None,
    ref: Annotated[Path | None, typer.Option(help="Reference clip (3–30 s) to clone the voice from")] = None,
    emotion: Annotated[str | None, typer.Option(help="neutral, happy, sad, angry, surprised, ...")] = None,
    emotion_ref: Annotated[Path | None, typer.Option(help="Clip whose emotion to imitate")] = None,
    emotion_alpha: Annotated[float, typer.Option(help="Emotion strength, 0–2")] = 1.0,
    speed: Annotated[float, typer.Option(help="Speaking rate, 0.5–2.0")] = 1.0,
    duration: Annotated[float | None, typer.Option(help="Exact length of the audio in seconds")] = None,
    pitch_scale: Annotated[float, typer.Option(help="Pitch variation multiplier")] = 1.0,
    energy_scale: Annotated[float, typer.Option(help="Energy multiplier")] = 1.0,
    fmt: Annotated[str | None, typer.Option("--format", help="wav|mp3|flac|opus|aac|pcm (default: suffix)")] = None,
    backend: Annotated[str, typer.Option(help="Engine backend")] = "eager",
    device: DeviceOpt = "auto",
    model: ModelOpt = None,
    lexicon: LexiconOpt = None,
) -> None:
    """Synthesize TEXT into an audio file (written atomically: nothing half-written on failure)."""

    def body() -> None:
        import numpy as np
        from tqdm import tqdm

        from rtvox.audio import write_audio
        from rtvox.runtime import Synthesizer
        from rtvox.text import Lexicon

        if voice and ref:
            raise InputError("give either --voice or --ref, not both")
        if voice is not None and not voice.strip():
            raise InputError("--voice is empty; give a voice name (rtvox voices list) or leave it out", param="voice")
        if emotion and emotion_ref:
            raise InputError("give either --emotion or --emotion-ref, not both", param="emotion")
        fmt_name = output_format(output, fmt)
        check_settings(
            emotion=emotion,
            emotion_alpha=emotion_alpha,
            speed=speed,
            duration=duration,
            pitch_scale=pitch_scale,
            energy_scale=energy_scale,
        )
        content = read_text(text)
        to_stdout = str(output) == "-"
        # A document: large static batches, resumable (finished segments wait in OUTPUT.parts/), any length.
        document = text.startswith("@") and duration is None and not to_stdout
        if not document and len(content) > CLI_MAX_CHARS:  # found before the model loads, with the way out
            raise TextError(
                f"text is {len(content)} characters, over the limit of {CLI_MAX_CHARS}; put it in a file and pass "
                "@FILE with -o FILE and no --duration: a document is spoken in resumable parts, at any length",
                param="text",
            )
        with contextlib.ExitStack() as held:
            if document:  # one run per output: a second is refused here, before the model loads
                from rtvox.runtime.offline import output_lock

                held.enter_context(output_lock(output))
            synth = Synthesizer(
                model, device=device, backend=backend, lexicon=Lexicon.load(lexicon) if lexicon else None
            )
            settings: dict[str, Any] = {
                "voice": voice,
                **({} if ref is None else synth.speaker_profile(ref)),
                "emotion": emotion,
                "emotion_alpha": emotion_alpha,
                "speed": speed,
                "duration": duration,
                "pitch_scale": pitch_scale,
                "energy_scale": energy_scale,
                "max_chars": CLI_MAX_CHARS,
            }
            if voice is not None:  # a clone's timbre, for every path below (the document path builds its own requests)
                settings["speaker_timbre"] = synth.voice_timbre(voice)
            if document:
                from rtvox.runtime.offline import PARTS_SUFFIX, speak_file

                try:
                    seconds = speak_file(synth, content, output, fmt_name, settings, emotion_ref, locked=True)
                except KeyboardInterrupt:  # said, since a folder the user did not name stays behind
                    parts = output.with_name(output.name + PARTS_SUFFIX)
                    kept = (
                        f"; finished segments wait in {parts}/: run the same command to resume"
                        if parts.is_dir()
                        else ""
                    )
                    typer.echo(f"interrupted: {output} was not written{kept}", err=True)
                    raise typer.Exit(130) from None
                typer.echo(f"wrote {output} ({seconds:.2f} s)", err=True)
                return
            pieces = []
            quiet = len(content) < PROGRESS_MIN_CHARS
            with tqdm(desc="synthesizing", unit="chunk", disable=quiet, file=sys.stderr) as bar:
                for chunk in synth.stream(content, emotion_ref=emotion_ref, **settings):
                    pieces.append(chunk.audio)
                    for warning in chunk.warnings:  # text left out (a script rtvox cannot read): say so, go on
                        tqdm.write(f"warning: not spoken: {warning}", file=sys.stderr)
                    bar.update(1)
            audio = np.concatenate(pieces)
            if to_stdout:
                from rtvox.audio import encode_audio

                sys.stdout.buffer.write(encode_audio(audio, SAMPLE_RATE, fmt_name))
                sys.stdout.buffer.flush()
                typer.echo(f"wrote {len(audio) / SAMPLE_RATE:.2f} s of {fmt_name} to stdout", err=True)
                return
            write_audio(output, audio, SAMPLE_RATE, fmt=fmt_name)
            typer.echo(f"wrote {output} ({len(audio) / SAMPLE_RATE:.2f} s)", err=True)

    _run(body)


@voices_app.command("list")
def voices_list(model: ModelOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List built-in and cloned voices."""

    def body() -> None:
        from rtvox.runtime import Synthesizer

        synth = Synthesizer(model, device="cpu")
        rows = [
            {"name": v.name, "builtin": v.builtin, "gender": v.gender, "language": v.language}
            | ({"label": v.description} if not v.builtin and v.description else {})
            for v in synth.voices.list()
        ]
        if as_json:
            typer.echo(json.dumps(rows, ensure_ascii=False))
            return
        for row in rows:
            kind = "built-in" if row["builtin"] else "clone"
            label = f"  ({row['label']})" if "label" in row else ""
            typer.echo(f"{row['name']:<24} {kind:<9} {row['gender']:<8} {row['language']}{label}")

    _run(body)


@voices_app.command("add")
def voices_add(
    name: Annotated[str, typer.Argument(help="Name of the new voice")],
    reference: Annotated[Path, typer.Argument(help="Reference clip, 3–30 s of one speaker")],
    model: ModelOpt = None,
) -> None:
    """Clone a voice from a reference clip and keep it for later use (replacing a clone of the same name)."""

    def body() -> None:
        from rtvox.runtime import Synthesizer

        synth = Synthesizer(model, device="cpu")
        existed = synth.voices.has(name)  # a clone of that name is replaced: said, not done silently
        voice = synth.clone_voice(name, reference)
        typer.echo(f"{'replaced' if existed else 'added'} voice {voice.name} ({synth.voices.clones_dir})")

    _run(body)


@voices_app.command("rm")
def voices_rm(
    name: Annotated[str, typer.Argument(help="Cloned voice to remove")],
    model: ModelOpt = None,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            envvar="RTVOX_REDIS_URL",
            help="Also delete it where servers share clones (as DELETE /v1/audio/voices/{id} does)",
        ),
    ] = None,
) -> None:
    """Remove a cloned voice (from the local clones folder and, with a Redis URL, from every server)."""

    def body() -> None:
        from rtvox.runtime import Synthesizer

        store = Synthesizer(model, device="cpu").voices
        if not redis_url:
            store.remove(name)
            typer.echo(f"removed voice {name}")
            return
        from rtvox.runtime.voices import validate_voice_name
        from rtvox.server.voices import delete_shared, remember_delete

        local = store.has(name) or bool(store.labelled(name))
        voice_id = store.get(name).name if local else name  # a label names its one clone's id
        if local:
            store.remove(voice_id)  # a built-in is refused here
        else:
            validate_voice_name(name)  # only an id reaches the shared table
        try:
            shared = delete_shared(redis_url, voice_id)
        except RtvoxError as exc:
            if not local:
                raise
            remember_delete(store.clones_dir, voice_id)  # a server on this folder sends it at its next catch-up
            raise RtvoxError(f"removed voice {voice_id} here, but not from the shared table: {exc}") from None
        if not (local or shared):
            raise VoiceNotFoundError(f"no cloned voice named {name!r} here or in Redis", param="voice")
        remember_delete(store.clones_dir, voice_id)
        typer.echo(f"removed voice {voice_id}" + (" (and from Redis)" if shared else ""))

    _run(body)


@app.command()
def demo(
    output: Annotated[Path, typer.Option("-o", "--output")] = Path("demo.wav"),
    device: DeviceOpt = "auto",
    model: ModelOpt = None,
) -> None:
    """Synthesize a short zh/en demo with the default voice (the main job until the HTTP API lands)."""

    def body() -> None:
        from rtvox.audio import write_audio
        from rtvox.runtime import Synthesizer

        fmt_name = output_format(output, None)  # a bad path or suffix fails now, not after the synthesis
        synth = Synthesizer(model, device=device)
        result = synth.synthesize("你好，欢迎使用 rtvox。This is a quick demo of mixed Chinese and English speech.")
        write_audio(output, result.audio, SAMPLE_RATE, fmt=fmt_name)
        typer.echo(f"wrote {output} ({result.seconds:.2f} s) with model {synth.model_dir}")

    _run(body)


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="RTVOX_HOST", help="Interface to bind (0.0.0.0: all)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="RTVOX_PORT", help="TCP port")] = 8000,
    model: Annotated[str | None, typer.Option(envvar="RTVOX_MODEL", help="Model directory or shipped name")] = None,
    device: Annotated[str, typer.Option(envvar="RTVOX_DEVICE", help="auto, cpu or cuda")] = "auto",
    backend: Annotated[
        str,
        typer.Option(
            envvar="RTVOX_BACKEND", help="Engine backend (auto: the captured pipeline on a GPU, per module on a CPU)"
        ),
    ] = "auto",
    api_key: Annotated[
        list[str] | None, typer.Option(help="Accepted Bearer key (repeatable; env RTVOX_API_KEYS, comma separated)")
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="Origin allowed by CORS (repeatable, '*' for any; env RTVOX_CORS_ORIGINS)")
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option(envvar="RTVOX_REDIS_URL", help="Redis for shared embeddings and cloned voices")
    ] = None,
    max_upload_mb: Annotated[float, typer.Option(envvar="RTVOX_MAX_UPLOAD_MB", help="Largest reference clip")] = 10.0,
    max_queue: Annotated[int, typer.Option(envvar="RTVOX_MAX_QUEUE", help="Live requests before 429")] = 256,
    max_batch: Annotated[
        int | None, typer.Option(envvar="RTVOX_MAX_BATCH", help="Chunks per batched engine call (64 GPU, 16 CPU)")
    ] = None,
    max_wait_ms: Annotated[float, typer.Option(envvar="RTVOX_MAX_WAIT_MS", help="Batch wait")] = 10.0,
    deadline_s: Annotated[float, typer.Option(envvar="RTVOX_DEADLINE_S", help="Per-request budget, 0: none")] = 60.0,
    first_chunk_wait_ms: Annotated[
        float | None,
        typer.Option(
            envvar="RTVOX_FIRST_CHUNK_WAIT_MS",
            help="Batch wait of first chunks (default: 0 on a GPU, --max-wait-ms on the CPU)",
        ),
    ] = None,
    max_chunk_phonemes: Annotated[
        int | None,
        typer.Option(
            envvar="RTVOX_MAX_CHUNK_PHONEMES",
            min=2,
            help="Most phonemes in a streamed chunk after the first (default: 96 on the CPU, 200 on a GPU)",
        ),
    ] = None,
    first_chunk_phonemes: Annotated[
        int,
        typer.Option(
            envvar="RTVOX_FIRST_CHUNK_PHONEMES",
            min=2,
            help="Most phonemes in a stream's first chunk (smaller: earlier first audio, an earlier join)",
        ),
    ] = FIRST_CHUNK_PHONEMES,
    min_first_chunk_phonemes: Annotated[
        int | None,
        typer.Option(
            envvar="RTVOX_MIN_FIRST_CHUNK_PHONEMES",
            min=0,
            help="Fewest phonemes a first chunk ends at a punctuation cut (0: none; default 20 on the CPU, 0 on a GPU)",
        ),
    ] = None,
    frontend_processes: Annotated[
        int | None,
        typer.Option(
            envvar="RTVOX_FRONTEND_PROCESSES", help="Text frontend worker processes (0: a thread; default 8 GPU, 0 CPU)"
        ),
    ] = None,
    batches_in_flight: Annotated[
        int | None,
        typer.Option(
            envvar="RTVOX_BATCHES_IN_FLIGHT",
            help="Batches queued to the engines at once (default 2 on a GPU with the captured pipeline, 1 otherwise)",
        ),
    ] = None,
    engine_process: Annotated[
        bool,
        typer.Option(
            envvar="RTVOX_ENGINE_PROCESS", help="Run the engines in a process of their own (GPU serving under load)"
        ),
    ] = False,
    preempt_steps: Annotated[
        bool,
        typer.Option(
            "--preempt-steps/--no-preempt-steps",
            envvar="RTVOX_PREEMPT_STEPS",
            help="First chunks overtake a step in progress at its preemption points (CPU engines)",
        ),
    ] = True,
    workers: Annotated[
        int | None,
        typer.Option(
            envvar="RTVOX_WORKERS",
            help="Server processes on the port, each with its own engines (default: 2 on a GPU with room, else 1)",
        ),
    ] = None,
    fused_kernels: Annotated[
        bool | None,
        typer.Option(
            "--fused-kernels/--no-fused-kernels",
            envvar="RTVOX_FUSED_KERNELS",
            help="GPU vocoder blocks as fused Triton kernels (default: on with 2+ workers on a GPU)",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option(envvar="RTVOX_LOG_LEVEL", help="critical, error, warning, info, debug or trace")
    ] = "info",
) -> None:
    """Run the HTTP service: OpenAI-compatible speech API, voice cloning, /v1/tts, metrics, web page at /."""

    def body() -> None:
        from rtvox.server.config import MIB, ServerConfig, split_list
        from rtvox.server.serve import serve as run_server

        if not (math.isfinite(max_upload_mb) and max_upload_mb > 0):  # int() of inf raised OverflowError
            raise InputError(f"--max-upload-mb must be a positive number, got {max_upload_mb}", param="max_upload_mb")
        if redis_url:  # a malformed URL failed deep in the app's start with a traceback
            from redis.connection import parse_url

            try:
                parse_url(redis_url)
            except ValueError as exc:  # the URL itself is not echoed: it may hold a password
                raise InputError(f"--redis-url is not a Redis URL: {exc}", param="redis_url") from None
        try:
            config = ServerConfig(
                host=host,
                port=port,
                model=model,
                device=device,
                backend=backend,
                api_keys=tuple(api_key or ()) or split_list(os.environ.get("RTVOX_API_KEYS")),
                cors_origins=tuple(cors_origin or ()) or split_list(os.environ.get("RTVOX_CORS_ORIGINS")),
                redis_url=redis_url or None,
                max_upload_bytes=int(max_upload_mb * MIB),
                max_queue=max_queue,
                max_batch=max_batch,
                max_wait_ms=max_wait_ms,
                deadline_s=deadline_s or None,
                first_chunk_wait_ms=first_chunk_wait_ms,
                max_chunk_phonemes=max_chunk_phonemes,
                first_chunk_phonemes=first_chunk_phonemes,
                min_first_chunk_phonemes=min_first_chunk_phonemes,
                frontend_processes=frontend_processes,
                batches_in_flight=batches_in_flight,
                engine_process=engine_process,
                preempt_steps=preempt_steps,
                workers=workers,
                fused_kernels=fused_kernels,
                log_level=log_level.lower(),
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
        check_listen(config.host, config.port)  # before the model loads; uvicorn would fail only after it
        run_server(config)

    _run(body)


BackendOpt = Annotated[str, typer.Option(help="eager, inductor, aoti, onnx, tensorrt (build: also auto)")]
DtypeOpt = Annotated[str, typer.Option(help="float32, float16, bfloat16 or int8")]
ProfileOpt = Annotated[str, typer.Option(help="Shape profile: default, batch1 or ci")]
ModulesOpt = Annotated[str, typer.Option(help="Comma-separated modules (acoustic_encode,acoustic_decode,vocoder,...)")]
_PIPELINE = "acoustic_encode,acoustic_decode,vocoder"


@app.command()
def export(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for the artifacts and manifest.json")],
    backend: Annotated[str, typer.Option(help="onnx or aoti")] = "onnx",
    dtype: DtypeOpt = "float32",
    device: DeviceOpt = "cpu",
    profile: ProfileOpt = "default",
    modules: ModulesOpt = _PIPELINE,
    model: ModelOpt = None,
) -> None:
    """Export each module as a portable artifact (.onnx or AOTInductor .pt2) with dynamic shapes."""

    def body() -> None:
        from rtvox.engines.cli_support import export_command

        with no_empty_folder_left(out):  # a bad --backend or --model is found after the folder is made
            exported = export_command(model, out, backend, dtype, device, profile, modules)
        for name, path in exported.items():
            typer.echo(f"{name}: {path}")

    _run(body)


@app.command()
def build(
    backend: BackendOpt = "auto",
    dtype: DtypeOpt = "float32",
    device: DeviceOpt = "auto",
    profile: ProfileOpt = "default",
    modules: ModulesOpt = _PIPELINE,
    rebuild: Annotated[bool, typer.Option(help="Ignore cached engines")] = False,
    model: ModelOpt = None,
) -> None:
    """Build (or load from the engine cache) and warm up the engines; prints what was built."""

    def body() -> None:
        from rtvox.engines.cli_support import build_command

        typer.echo(json.dumps(build_command(model, backend, dtype, device, profile, modules, rebuild), indent=1))

    _run(body)


@app.command()
def bench(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for bench.json, bench.md, bench.png")] = Path(
        "bench-out"
    ),
    variants: Annotated[
        str, typer.Option(help="backend:dtype list, e.g. eager:float32,onnx:float32; `auto` = what serving picks")
    ] = "eager:float32,onnx:float32,eager:bfloat16,auto",
    device: DeviceOpt = "cpu",
    repeats: Annotated[int, typer.Option(min=1, help="Timed runs per text (after warm-up)")] = 20,
    batches: Annotated[str, typer.Option(help="Batch sizes of the throughput sweep")] = "1,8,32,64",
    profile: ProfileOpt = "default",
    piper: Annotated[bool, typer.Option("--piper", help="Also time Piper joe-medium on the same texts")] = False,
    load: Annotated[bool, typer.Option("--load", help="Also run the runtime's load benchmark")] = False,
    model: ModelOpt = None,
) -> None:
    """Benchmark backends × precisions: latency, RTF, throughput, memory, quality, roofline."""

    def body() -> None:
        from rtvox.engines.cli_support import bench_command

        with no_empty_folder_left(out):  # a bad --profile, --device or --model is found after the folder is made
            report = bench_command(model, out, variants, device, repeats, batches, profile, piper, load)
        typer.echo(report)

    _run(body)


def main() -> None:
    app()
