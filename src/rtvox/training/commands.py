"""`rtvox train ...` commands. Thin: parse flags, call the training modules (imported only when run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rtvox.cli_errors import one_message
from rtvox.constants import SPOKEN_LANGS
from rtvox.errors import InputError

train_app = typer.Typer(no_args_is_help=True, help="Train the acoustic model, the vocoder or the emotion judge.")

DataOpt = Annotated[Path, typer.Option("--data", help="folder of packed shards (recipes/train/pack.py)")]
RunOpt = Annotated[Path, typer.Option("--run-dir", help="where state.pt, log.jsonl and the snapshot go")]
InitOpt = Annotated[Path | None, typer.Option("--init", help="weight snapshot to start from")]
SnapOpt = Annotated[Path | None, typer.Option("--snapshot", help="where to write the weight snapshot")]
MinutesOpt = Annotated[float, typer.Option("--minutes", help="wall-clock budget of this run")]


def _device_name(value: str) -> str:
    """--device must name a device (tpu, mps, meta: exit 2 at once; whether a GPU is there is found at the run)."""
    from rtvox.engines.base import check_device_name

    try:
        if value == "auto":  # a run names its device
            raise InputError("unknown device 'auto' for training; use cpu or cuda", param="device")
        return check_device_name(value)
    except InputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device") from None


DeviceOpt = Annotated[str, typer.Option("--device", callback=_device_name)]
# the exporters' shared options
VocoderSnapOpt = Annotated[
    Path, typer.Option("--vocoder", help="snapshot folder of the vocoder, or a model directory whose vocoder to keep")
]
VoicesOpt = Annotated[
    Path,
    typer.Option(
        "--voices", help="JSON: built-in voice names -> corpus speakers, or a model directory whose voices to keep"
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="the model directory to write")]
NameOpt = Annotated[str, typer.Option("--name")]
VersionOpt = Annotated[str, typer.Option("--version")]
# the trainers' shared option
SpeakerRefOpt = Annotated[
    str,
    typer.Option(
        "--speaker-ref",
        help="speaker embedding of a row: 'neutral' (another neutral clip of the speaker), 'neutral-own' (neutral rows"
        " their own, emotional rows another neutral clip), 'own' (runs to T11, T15) or 'cross-lingual' (own, but half"
        " the rows a clip of the same speaker and emotion in the other language)",
    ),
]


SaveEveryOpt = Annotated[
    float, typer.Option("--save-every", min=0.05, help="minutes between checkpoints (each scores the held-out set)")
]
DurationsOpt = Annotated[
    Path | None,
    typer.Option(
        "--durations",
        help="phoneme durations of the corpus (recipes/train/durations.py), for phoneme-pointer codecs",
        exists=True,
        dir_okay=False,
    ),
]


def _speaker_ref(value: str) -> str:
    """The --speaker-ref value, checked before any data loads."""
    from rtvox.training.data import SPEAKER_REFS

    if value not in SPEAKER_REFS:
        raise typer.BadParameter(f"must be one of {', '.join(SPEAKER_REFS)}, not {value!r}", param_hint="--speaker-ref")
    return value


@train_app.command("acoustic")
def acoustic(
    data: DataOpt,
    run_dir: RunOpt,
    preset: Annotated[str, typer.Option("--preset")] = "small",
    init: Annotated[
        Path | None,
        typer.Option(
            "--init",
            help="weight snapshot to start from, or a model directory (e.g. models/rtvox-small) to warm-start its "
            "acoustic and emotion weights beside a fresh aligner (use with --aligner-only-steps and a lower --lr)",
        ),
    ] = None,
    snapshot: SnapOpt = None,
    minutes: MinutesOpt = 8.0,
    max_steps: Annotated[int, typer.Option("--max-steps")] = 1_000_000,
    batch_frames: Annotated[int, typer.Option("--batch-frames")] = 24_000,
    lr: Annotated[float, typer.Option("--lr")] = 1e-3,
    warmup: Annotated[int, typer.Option("--warmup", help="learning-rate warm-up steps")] = 1000,
    skip_symbols: Annotated[
        str, typer.Option("--skip-symbols", help="comma-separated frontend symbols the model never sees")
    ] = "#1,#2",
    prior_width: Annotated[
        float, typer.Option("--prior-width", help="aligner's diagonal prior width (fraction of the utterance)")
    ] = 0.05,
    flat_start: Annotated[
        int, typer.Option("--flat-start", help="steps of near-uniform alignment before the prior widens")
    ] = 1500,
    prosody_norm: Annotated[
        str, typer.Option("--prosody-norm", help="pitch/energy z-scores per 'speaker' (default) or 'utterance'")
    ] = "speaker",
    dropout: Annotated[
        float | None, typer.Option("--dropout", help="acoustic model dropout (default: the preset's)")
    ] = None,
    frame_position: Annotated[
        bool,
        typer.Option(
            "--frame-position/--no-frame-position",
            help="feed the decoder each frame's place inside its phoneme (tone contours); a new zero-start layer",
        ),
    ] = False,
    aligner_only_steps: Annotated[
        int, typer.Option("--aligner-only-steps", help="first steps that train the aligner alone", min=0)
    ] = 0,
    speaker_ref: SpeakerRefOpt = "neutral",
    train_only: Annotated[
        str,
        typer.Option(
            "--train-only",
            help="'all' (default), 'emotion': only the emotion encoder, table and the emotion half of the layers"
            " that read the condition (a warm start's voices and text rendering stay as they are), or"
            " 'emotion-fixed-neutral': the same with the neutral label's output held as loaded",
        ),
    ] = "all",
    device: DeviceOpt = "cuda",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """FastSpeech2 + aligner + emotion encoder/table, jointly (resumes from RUN_DIR/state.pt)."""
    from rtvox.text.vocab import Vocabulary
    from rtvox.training.acoustic import TRAIN_ONLY, AcousticRun, train_acoustic

    skip = tuple(s for s in (part.strip() for part in skip_symbols.split(",")) if s)
    vocab = Vocabulary.default()
    if unknown := [s for s in skip if s not in vocab.symbols]:
        raise typer.BadParameter(f"not phoneme symbols: {unknown}", param_hint="--skip-symbols")
    if dropout is not None and not 0.0 <= dropout < 1.0:
        raise typer.BadParameter(f"must be in [0, 1), not {dropout}", param_hint="--dropout")
    speaker_ref = _speaker_ref(speaker_ref)
    if train_only not in TRAIN_ONLY:
        hint = "--train-only"
        raise typer.BadParameter(f"must be one of {', '.join(TRAIN_ONLY)}, not {train_only!r}", param_hint=hint)
    if train_only != "all" and aligner_only_steps:
        raise typer.BadParameter("aligner-only steps train the aligner, which stays frozen", param_hint="--train-only")

    run = AcousticRun(
        data=data,
        run_dir=run_dir,
        preset=preset,
        init=init,
        snapshot=snapshot,
        minutes=minutes,
        max_steps=max_steps,
        batch_frames=batch_frames,
        lr=lr,
        warmup=warmup,
        skip_symbols=skip,
        prior_width=prior_width,
        flat_start=flat_start,
        prosody_norm=prosody_norm,
        dropout=dropout,
        frame_position=frame_position,
        aligner_only_steps=aligner_only_steps,
        speaker_ref=speaker_ref,
        train_only=train_only,
        device=device,
        seed=seed,
    )
    with one_message():
        train_acoustic(run)


@train_app.command("vocoder")
def vocoder(
    data: DataOpt,
    run_dir: RunOpt,
    preset: Annotated[str, typer.Option("--preset")] = "vocos-small",
    init: InitOpt = None,
    snapshot: SnapOpt = None,
    minutes: MinutesOpt = 8.0,
    max_steps: Annotated[int, typer.Option("--max-steps")] = 1_000_000,
    batch: Annotated[int, typer.Option("--batch")] = 32,
    gan_start: Annotated[int, typer.Option("--gan-start", help="-1 = no adversarial losses")] = 0,
    lr: Annotated[float, typer.Option("--lr", help="learning rate (lower it to fine-tune an --init)")] = 5e-4,
    gta_fraction: Annotated[
        float,
        typer.Option(
            "--gta-fraction",
            help="share of each batch from ground-truth-aligned pairs (gta-*.npz in --data, recipes/train/gta.py)",
        ),
    ] = 0.0,
    device: DeviceOpt = "cuda",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """The vocoder on random audio segments (resumes from RUN_DIR/state.pt)."""
    from rtvox.training.vocoder import VocoderRun, train_vocoder

    with one_message():
        train_vocoder(
            VocoderRun(
                data=data,
                run_dir=run_dir,
                preset=preset,
                init=init,
                snapshot=snapshot,
                minutes=minutes,
                max_steps=max_steps,
                batch=batch,
                gan_start=gan_start,
                lr=lr,
                gta_fraction=gta_fraction,
                device=device,
                seed=seed,
            )
        )


@train_app.command("codec")
def codec(
    data: DataOpt,
    run_dir: RunOpt,
    preset: Annotated[str, typer.Option("--preset")] = "base",
    init: InitOpt = None,
    minutes: MinutesOpt = 8.0,
    max_steps: Annotated[int, typer.Option("--max-steps")] = 1_000_000,
    batch: Annotated[int, typer.Option("--batch", help="mel segments per batch")] = 32,
    segment: Annotated[int, typer.Option("--segment", help="mel frames per segment")] = 128,
    batch_frames: Annotated[
        int, typer.Option("--batch-frames", help="mel frames per batch of whole utterances (pointer presets)")
    ] = 24_000,
    lr: Annotated[float, typer.Option("--lr")] = 3e-4,
    durations: DurationsOpt = None,
    save_every: SaveEveryOpt = 2.0,
    device: DeviceOpt = "cuda",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """The AR family's FSQ mel tokenizer + token-to-mel decoder (resumes from RUN_DIR/state.pt); presets base,
    tiny, and the phoneme-pointer pointer, pointer-tiny (which need --durations)."""
    from rtvox.training.ar import ARRun, train_codec

    with one_message():
        train_codec(
            ARRun(
                data=data,
                run_dir=run_dir,
                preset=preset,
                init=init,
                minutes=minutes,
                max_steps=max_steps,
                batch=batch,
                segment=segment,
                batch_frames=batch_frames,
                lr=lr,
                durations=durations,
                save_every_min=save_every,
                device=device,
                seed=seed,
            )
        )


@train_app.command("ar")
def ar(
    data: DataOpt,
    run_dir: RunOpt,
    codec: Annotated[Path, typer.Option("--codec", help="snapshot folder of a trained codec")],
    preset: Annotated[str, typer.Option("--preset")] = "base",
    init: InitOpt = None,
    minutes: MinutesOpt = 8.0,
    max_steps: Annotated[int, typer.Option("--max-steps")] = 1_000_000,
    batch_frames: Annotated[int, typer.Option("--batch-frames")] = 24_000,
    lr: Annotated[float, typer.Option("--lr")] = 3e-4,
    speaker_ref: SpeakerRefOpt = "neutral",
    durations: DurationsOpt = None,
    dropout: Annotated[float, typer.Option("--dropout", min=0.0, max=0.9, help="the GPT's dropout")] = 0.0,
    save_every: SaveEveryOpt = 2.0,
    device: DeviceOpt = "cuda",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """The AR family's GPT decoder over the codec's tokens (resumes from RUN_DIR/state.pt; the weights of the
    lowest held-out cross-entropy are kept in RUN_DIR/best)."""
    from rtvox.training.ar import ARRun, train_ar

    speaker_ref = _speaker_ref(speaker_ref)

    with one_message():
        train_ar(
            ARRun(
                data=data,
                run_dir=run_dir,
                preset=preset,
                codec=codec,
                init=init,
                minutes=minutes,
                max_steps=max_steps,
                batch_frames=batch_frames,
                lr=lr,
                speaker_ref=speaker_ref,
                durations=durations,
                dropout=dropout,
                save_every_min=save_every,
                device=device,
                seed=seed,
            )
        )


@train_app.command("export")
def export(
    acoustic_snapshot: Annotated[Path, typer.Option("--acoustic")],
    vocoder_snapshot: VocoderSnapOpt,
    data: DataOpt,
    voices: VoicesOpt,
    out: OutOpt,
    name: NameOpt = "rtvox-base",
    version: VersionOpt = "1.0.0",
    prior: Annotated[
        bool,
        typer.Option(
            "--prior/--no-prior",
            help="compute the pitch bound and emotion prosody prior (--no-prior: the learned conditioning alone)",
        ),
    ] = True,
) -> None:
    """Build a model directory (fp16 safetensors, voices, config with the emotion prosody prior) from snapshots."""
    from rtvox.training.export import export_bundle

    with one_message():
        bundle = export_bundle(
            acoustic_snapshot, vocoder_snapshot, data, voices, out, name=name, version=version, prior=prior
        )
    typer.echo(f"wrote {out} ({', '.join(bundle.voices)})")


@train_app.command("prosody-prior")
def prosody_prior(
    data: DataOpt,
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the prior")],
) -> None:
    """The emotion prosody prior: the data's per-emotion pitch/energy/duration shifts minus the model's own,
    written into MODEL/config.json as "emotion_prosody", after bounding the model's pitch to the data's range
    (acoustic.pitch_bounds)."""
    from rtvox.training.prosody_prior import prosody_prior_command

    with one_message():
        prior = prosody_prior_command(data, model)
    bounds = prior.source.get("pitch_bounds")
    typer.echo(
        f"pitch bounds {bounds} (speaker z)" if bounds else "pitch unbounded (too little voiced speech per emotion)"
    )
    for emotion, shift in prior.shifts.items():
        typer.echo(f"{emotion:10s} {shift.to_dict()}")
    typer.echo(f"wrote {model / 'config.json'}")


@train_app.command("speaker-shift")
def speaker_shift(
    data: DataOpt,
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the shift")],
) -> None:
    """The emotion speaker shift: per emotion, how the data's emotional clips move their speaker's GE2E embedding,
    written into MODEL/config.json as "emotion_speaker_shift" (label requests move their voice that way). Run
    `rtvox train prosody-prior` afterwards, so the prior is solved with the shift in place."""
    from rtvox.training.speaker_shift import speaker_shift_command

    with one_message():
        shift = speaker_shift_command(data, model)
    for emotion, vector in shift.shifts.items():
        typer.echo(f"{emotion:10s} |d| = {sum(v * v for v in vector) ** 0.5:.3f}")
    typer.echo(f"wrote {model / 'config.json'}")


def _parse_pairs(items: list[str], low: float, high: float, form: str, example: str) -> dict[str, float]:
    """KEY=NUMBER arguments (`form` names them, e.g. "LANG=RATE") with every number in [low, high]; a bad one is a
    usage error naming it."""
    value_name = form.partition("=")[2]
    parsed: dict[str, float] = {}
    for item in items:
        key, _, value = (part.strip() for part in item.partition("="))
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not key or not low <= number <= high:
            raise typer.BadParameter(
                f"{item!r}: give {form} with {value_name} from {low} to {high}, e.g. {example}", param_hint=form + "..."
            )
        parsed[key] = number
    return parsed


def _merge_into_config(model: Path, field: str, parsed: dict[str, float]) -> None:
    """Merge KEY=NUMBER pairs into MODEL/config.json's `field` map (a 1.0 removes its key) and say what it holds."""
    import dataclasses

    from rtvox.models.bundle import ModelConfig
    from rtvox.training.prosody_prior import update_config

    def change(config: ModelConfig) -> ModelConfig:
        merged = {**getattr(config, field), **parsed}
        changes: dict[str, Any] = {field: {k: v for k, v in merged.items() if v != 1.0}}
        return dataclasses.replace(config, **changes)

    with one_message():
        config = update_config(model, change)
    typer.echo(f"{field} {getattr(config, field)}; wrote {model / 'config.json'}")


@train_app.command("language-rate")
def language_rate(
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the rates")],
    rates: Annotated[list[str], typer.Argument(help="LANG=RATE pairs, e.g. en=0.9 (1 removes a language's rate)")],
) -> None:
    """Set the natural speaking rate per language in MODEL/config.json ("language_rates"): a chunk's speed is the
    request's times its languages' rates (phoneme-weighted), so en=0.9 speaks English phonemes 1/0.9 as long."""
    from rtvox.models.bundle import LANGUAGE_RATE_MAX, LANGUAGE_RATE_MIN

    parsed = _parse_pairs(rates, LANGUAGE_RATE_MIN, LANGUAGE_RATE_MAX, "LANG=RATE", "en=0.9")
    for lang in parsed:
        if lang not in SPOKEN_LANGS:  # the languages the frontend reads (ModelConfig.chunk_rate)
            raise typer.BadParameter(f"unknown language {lang!r}; use zh or en", param_hint="LANG=RATE...")
    _merge_into_config(model, "language_rates", parsed)


@train_app.command("emotion-strength")
def emotion_strength(
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the strengths")],
    strengths: Annotated[
        list[str], typer.Argument(help="EMOTION=STRENGTH pairs, e.g. angry=1.6 (1 removes a label's strength)")
    ],
) -> None:
    """Set each emotion label's calibrated strength in MODEL/config.json ("emotion_strength"): a label request at
    emotion_alpha a is conditioned at a × strength (prior, speaker shift and emotion row alike), so alpha 1 asks
    for the calibrated default. Choose strengths on tuning sentences and check them on others
    (benchmarks/probes/emotion_strength_probe.py)."""
    from rtvox.constants import EMOTIONS
    from rtvox.models.bundle import EMOTION_STRENGTH_MAX, EMOTION_STRENGTH_MIN

    parsed = _parse_pairs(strengths, EMOTION_STRENGTH_MIN, EMOTION_STRENGTH_MAX, "EMOTION=STRENGTH", "angry=1.6")
    for label in parsed:
        if label not in EMOTIONS[1:]:
            raise typer.BadParameter(
                f"unknown emotion {label!r}; use one of: {', '.join(EMOTIONS[1:])}", param_hint="EMOTION=STRENGTH..."
            )
    _merge_into_config(model, "emotion_strength", parsed)


@train_app.command("timbre-match")
def timbre_match(
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the strength")],
    strength: Annotated[
        float, typer.Argument(help="share of a clone's spectral gap to its clip that is added (0: off)")
    ],
) -> None:
    """Set timbre matching of cloned voices in MODEL/config.json ("timbre_match", rtvox.runtime.timbre): a clone's
    mel gets STRENGTH times the clipped, level-free gap between its reference clip's long-term log-mel and the
    model's own rendering of its embedding. rtvox-small uses 0.5 (docs/QUALITY.md, "8.9.1")."""
    import dataclasses

    from rtvox.models.bundle import TIMBRE_MATCH_MAX
    from rtvox.training.prosody_prior import update_config

    if not 0.0 <= strength <= TIMBRE_MATCH_MAX:
        raise typer.BadParameter(f"must be from 0 to {TIMBRE_MATCH_MAX:g}, not {strength:g}", param_hint="STRENGTH")
    with one_message():
        config = update_config(model, lambda c: dataclasses.replace(c, timbre_match=float(strength)))
    typer.echo(f"timbre_match {config.timbre_match:g}; wrote {model / 'config.json'}")


@train_app.command("lead-in")
def lead_in(
    model: Annotated[Path, typer.Option("--model", help="model directory whose config.json gets the lead-ins")],
    pairs: Annotated[list[str], typer.Argument(help='LANG=TEXT pairs, e.g. "en=So," (an empty TEXT removes it)')],
) -> None:
    """Set the throw-away lead-in per language in MODEL/config.json ("lead_in"): TEXT and a pause are spoken
    before every chunk whose first phoneme is of LANG and cut off its audio, for a model that renders a chunk's
    first phoneme as lead-in silence. rtvox-small has none: measured, "en=So," was no clear gain and cost 28 % more
    frames (docs/QUALITY.md, "A lead-in")."""
    import dataclasses

    from rtvox.models.bundle import LEAD_IN_MAX_CHARS, ModelConfig
    from rtvox.runtime.synthesizer import lead_in_phonemes
    from rtvox.text import Frontend
    from rtvox.training.prosody_prior import update_config

    parsed: dict[str, str] = {}
    frontend = Frontend()
    for pair in pairs:
        lang, sep, text = pair.partition("=")
        if not sep or lang not in SPOKEN_LANGS or len(text.strip()) > LEAD_IN_MAX_CHARS:
            raise typer.BadParameter(
                f"{pair!r}: give LANG=TEXT with LANG zh or en and TEXT of at most {LEAD_IN_MAX_CHARS} characters",
                param_hint="LANG=TEXT...",
            )
        if text.strip():
            try:
                lead_in_phonemes(frontend, lang, text)
            except ValueError as e:
                raise typer.BadParameter(str(e), param_hint="LANG=TEXT...") from e
        parsed[lang] = text.strip()

    def change(config: ModelConfig) -> ModelConfig:
        merged = {k: v for k, v in {**config.lead_in, **parsed}.items() if v}
        return dataclasses.replace(config, lead_in=merged)

    with one_message():
        config = update_config(model, change)
    typer.echo(f"lead_in {config.lead_in}; wrote {model / 'config.json'}")


@train_app.command("export-ar")
def export_ar(
    codec_snapshot: Annotated[Path, typer.Option("--codec", help="snapshot folder of the codec (rtvox train codec)")],
    ar_snapshot: Annotated[Path, typer.Option("--ar", help="snapshot folder of the GPT (rtvox train ar)")],
    vocoder_snapshot: VocoderSnapOpt,
    data: DataOpt,
    voices: VoicesOpt,
    out: OutOpt,
    name: NameOpt = "rtvox-ar",
    version: VersionOpt = "0.1.0",
) -> None:
    """Build an autoregressive-family model directory (fp16 safetensors, voices, config) from snapshots."""
    from rtvox.training.export_ar import export_ar_bundle

    with one_message():
        bundle = export_ar_bundle(
            codec_snapshot, ar_snapshot, vocoder_snapshot, data, voices, out, name=name, version=version
        )
    typer.echo(f"wrote {out} ({', '.join(bundle.voices)})")


@train_app.command("distill-decoder")
def distill_decoder(
    teacher: Annotated[Path, typer.Option("--teacher", help="model directory whose decoder is distilled")],
    texts: Annotated[
        Path, typer.Option("--texts", help="one text per line (recipes/train/distill_texts.py writes one)")
    ],
    out: Annotated[Path, typer.Option("--out", help="the student's model directory (replaced if it exists)")],
    run_dir: RunOpt,
    keep: Annotated[
        str, typer.Option("--keep", help="the teacher's decoder blocks the student keeps, comma separated")
    ] = "0,1,3",
    kernel: Annotated[int, typer.Option("--kernel", help="the student's decoder FFN kernel (odd)")] = 3,
    postnet: Annotated[bool, typer.Option("--postnet/--no-postnet", help="keep the teacher's postnet")] = False,
    steps: Annotated[int, typer.Option("--steps", min=1)] = 2400,
    batch_frames: Annotated[int, typer.Option("--batch-frames", min=100)] = 4000,
    lr: Annotated[float, typer.Option("--lr")] = 3e-4,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    version: Annotated[str | None, typer.Option("--version", help="the student's version (default: teacher's)")] = None,
    minutes: Annotated[float | None, typer.Option("--minutes", help="wall-clock budget (resume to go on)")] = None,
    device: DeviceOpt = "cpu",
    feature_weight: Annotated[
        float,
        typer.Option("--feature-weight", min=0.0, help="weight of the block-level targets (0 = the mel alone)"),
    ] = 1.0,
) -> None:
    """A lighter decoder trained to reproduce TEACHER's mel from TEACHER's own encoder output (no corpus needed):
    fewer blocks (--keep), a shorter FFN kernel (--kernel), no postnet; everything else is the teacher's.
    Resumable: the pairs and the training state stay in --run-dir."""
    from rtvox.training.distill import StudentShape
    from rtvox.training.distill import distill_decoder as run

    try:
        blocks = tuple(int(b) for b in keep.split(","))
    except ValueError as e:
        raise typer.BadParameter(f"{keep!r}: give block indices such as 0,1,3", param_hint="--keep") from e
    with one_message():
        figures = run(
            teacher,
            texts,
            out,
            run_dir,
            StudentShape(blocks, kernel, postnet),
            steps=steps,
            batch_frames=batch_frames,
            lr=lr,
            seed=seed,
            version=version,
            minutes=minutes,
            device=device,
            feature_weight=feature_weight,
            log=typer.echo,
        )
    typer.echo(f"valid L1 {figures['valid_l1']:.4f} at step {int(figures['step'])}; wrote {out}")
