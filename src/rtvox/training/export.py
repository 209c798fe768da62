"""Assemble a shipped model directory from training snapshots and the packed corpus's speaker embeddings.

The config gets the emotion prosody prior (rtvox.training.prosody_prior) from the same data. Built-in voices are
corpus speakers: each voice's embedding is the renormalized mean GE2E embedding of that
speaker's neutral training utterances (the same encoder a user's reference clip goes through, so built-in and
cloned voices live in one space). Or they are kept as they are from a shipped model directory, so a fine-tuned
model speaks with the voices its users already know.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.errors import InputError
from rtvox.models.bundle import CONFIG_NAME, ModelBundle, ModelConfig, load_voices_and_card, load_weights
from rtvox.models.vocoder import AnyVocoder, AnyVocoderConfig, build_vocoder, vocoder_preset
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import build_modules, is_model_dir
from rtvox.training.checkpoint import load_snapshot
from rtvox.training.data import AcousticSet, load_acoustic
from rtvox.training.prosody_prior import prosody_prior_for


def speaker_means(data: AcousticSet) -> dict[str, np.ndarray]:
    """Corpus speaker -> unit-norm mean GE2E embedding over its neutral utterances (all when none)."""
    neutral = data.info.emotions.index("neutral")
    out: dict[str, np.ndarray] = {}
    for index, name in enumerate(data.info.speakers):
        rows = data.speaker == index
        if not rows.any():
            continue
        pick = rows & (data.emotion == neutral)
        mean = data.ge2e[pick if pick.any() else rows].mean(0)
        out[name] = (mean / np.linalg.norm(mean)).astype(np.float32)
    return out


def builtin_voices(data: AcousticSet, voices_file: Path) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]], str]:
    """The built-in voices of `voices_file` (JSON: {"default": name, "voices": [{name, speaker, ...}]}) from the
    corpus speakers' mean embeddings: (name -> embedding, voices.json entries, default voice name)."""
    spec: dict[str, Any] = json.loads(voices_file.read_text(encoding="utf-8"))
    means = speaker_means(data)
    voices: dict[str, torch.Tensor] = {}
    meta: list[dict[str, Any]] = []
    for entry in spec["voices"]:
        speaker = entry["speaker"]
        if speaker not in means:
            raise InputError(f"voice {entry['name']!r}: corpus speaker {speaker!r} is not in the packed data")
        voices[entry["name"]] = torch.from_numpy(means[speaker])
        meta.append({k: v for k, v in entry.items() if k != "speaker"} | {"description": entry.get("description", "")})
    return voices, meta, spec.get("default", meta[0]["name"])


def voices_source(data: AcousticSet, source: Path) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]], str]:
    """The built-in voices to ship: derived from the corpus by a voices JSON file (builtin_voices), or kept as
    they are from a shipped model directory (its voices.safetensors, voices.json and default voice)."""
    if not is_model_dir(source):
        if not source.is_file():
            raise InputError(f"--voices {source}: neither a voices JSON file nor a model directory (config.json)")
        return builtin_voices(data, source)
    shipped = ModelConfig.from_dict(json.loads((source / CONFIG_NAME).read_text(encoding="utf-8")))
    voices, meta, _card = load_voices_and_card(source, shipped.default_voice, torch.device("cpu"), torch.float32)
    if not voices:
        raise InputError(f"model directory {source} has no built-in voices (voices.safetensors)")
    return dict(voices), [dict(m) for m in meta], shipped.default_voice or next(iter(voices))


def load_vocoder_source(source: Path) -> tuple[AnyVocoderConfig, AnyVocoder]:
    """The vocoder to ship: from a training snapshot (progress.json + weights), or taken as it is from a shipped
    model directory (its config's vocoder and vocoder*.safetensors), so a new acoustic model can keep the old
    vocoder without that vocoder's training snapshot."""
    if is_model_dir(source):
        shipped = ModelConfig.from_dict(json.loads((source / CONFIG_NAME).read_text(encoding="utf-8")))
        vocoder = build_vocoder(shipped.vocoder)
        state = load_weights(source, "vocoder", torch.device("cpu"), torch.float32)
        if not state:
            raise InputError(f"model directory {source} has no vocoder weights (vocoder*.safetensors)")
        vocoder.load_state_dict(state)
        return shipped.vocoder, vocoder
    if not (source / "progress.json").is_file():
        raise InputError(f"{source} is neither a vocoder snapshot (progress.json) nor a model directory (config.json)")
    progress = json.loads((source / "progress.json").read_text(encoding="utf-8"))
    config = vocoder_preset(progress.get("preset", "vocos-small"))
    vocoder = build_vocoder(config)
    load_snapshot(source, {"vocoder": vocoder})
    return config, vocoder


def export_bundle(
    acoustic_snapshot: Path,
    vocoder_snapshot: Path,
    data_dir: Path,
    voices_file: Path,
    out: Path,
    *,
    name: str = "rtvox-base",
    version: str = "1.0.0",
    model_card: str = "",
    prior: bool = True,
) -> ModelBundle:
    progress = json.loads((acoustic_snapshot / "progress.json").read_text(encoding="utf-8"))
    vocoder_config, vocoder = load_vocoder_source(vocoder_snapshot)
    vocab = Vocabulary.default()
    config = ModelConfig.preset(progress.get("preset", "small"), vocab_size=len(vocab), name=name, version=version)
    config = dataclasses.replace(
        config,
        acoustic=dataclasses.replace(config.acoustic, frame_position=bool(progress.get("frame_position", False))),
        vocoder=vocoder_config,
        skip_symbols=tuple(progress.get("skip_symbols", ())),
    )
    modules = build_modules(config, len(vocab))
    load_snapshot(acoustic_snapshot, modules)
    data = load_acoustic(data_dir)
    voices, meta, default = voices_source(data, voices_file)
    config = dataclasses.replace(config, default_voice=default)
    bundle = ModelBundle(
        config,
        modules["acoustic"].eval(),  # type: ignore[arg-type]
        vocoder.eval(),
        modules["emotion_encoder"].eval(),  # type: ignore[arg-type]
        modules["emotion_table"].eval(),  # type: ignore[arg-type]
        voices,
        meta,
        vocab.to_dict(),
        model_card=model_card,
    )
    bundle.save(out)
    if prior:  # needs the saved directory: it calibrates against the model itself
        prosody_prior_for(out, data, data_dir)
    return ModelBundle.load(out)
