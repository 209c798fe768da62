"""Assemble an autoregressive-family model directory (rtvox.models.ar_bundle) from the codec, GPT and vocoder
snapshots and the packed corpus's speaker embeddings (`rtvox train export-ar`).

Each module is rebuilt from its snapshot's recorded preset exactly as its trainer built it, so the weights load
strictly; the built-in voices are made as for the default family (rtvox.training.export.voices_source).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rtvox.errors import InputError
from rtvox.models.ar import ARDecoder
from rtvox.models.ar_bundle import ARBundle, ARModelConfig
from rtvox.models.codec import MelCodec
from rtvox.models.emotion import EmotionConfig, EmotionTable
from rtvox.text.vocab import Vocabulary
from rtvox.training.ar import SKIP_SYMBOLS, ar_config, codec_config
from rtvox.training.checkpoint import PROGRESS_NAME, load_snapshot
from rtvox.training.data import load_acoustic
from rtvox.training.export import load_vocoder_source, voices_source


def _progress(snapshot: Path, kind: str | None) -> dict[str, Any]:
    """progress.json of a snapshot, checked to come from the expected trainer when it records one."""
    path = snapshot / PROGRESS_NAME
    if not path.is_file():
        raise InputError(f"{snapshot} is not a weight snapshot ({PROGRESS_NAME} is missing)")
    progress: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if kind is not None and progress.get("kind", kind) != kind:
        raise InputError(f"{snapshot} is a {progress['kind']!r} snapshot; pass the {kind!r} one")
    return progress


def export_ar_bundle(
    codec_snapshot: Path,
    ar_snapshot: Path,
    vocoder_snapshot: Path,
    data_dir: Path,
    voices_file: Path,
    out: Path,
    *,
    name: str = "rtvox-ar",
    version: str = "0.1.0",
    model_card: str = "",
) -> ARBundle:
    codec = MelCodec(codec_config(_progress(codec_snapshot, "codec").get("preset", "base")))
    load_snapshot(codec_snapshot, {"codec": codec})
    ar_progress = _progress(ar_snapshot, "ar")
    if ar_progress.get("n_codes", codec.config.n_tokens) != codec.config.n_tokens:
        raise InputError(
            f"{ar_snapshot} was trained over {ar_progress['n_codes']} tokens, {codec_snapshot} makes "
            f"{codec.config.n_tokens}; pass the codec the GPT was trained with"
        )
    gpt = ARDecoder(ar_config(ar_progress.get("preset", "base"), codec.config))
    table = EmotionTable(EmotionConfig())
    load_snapshot(ar_snapshot, {"ar": gpt, "emotion_table": table})
    vocoder_config, vocoder = load_vocoder_source(vocoder_snapshot)
    voices, meta, default = voices_source(load_acoustic(data_dir), voices_file)
    vocab = Vocabulary.default()
    config = ARModelConfig(
        name=name,
        version=version,
        vocab_size=len(vocab),
        ar=gpt.config,
        codec=codec.config,
        vocoder=vocoder_config,
        emotion=table.config,
        default_voice=default,
        skip_symbols=SKIP_SYMBOLS,
    )
    bundle = ARBundle(
        config,
        gpt.eval(),
        codec.eval(),
        vocoder.eval(),
        table.eval(),
        voices,
        meta,
        vocab.to_dict(),
        model_card=model_card,
    )
    return ARBundle.load(bundle.save(out))
