"""The autoregressive family's model directory format and its loader (the default family's is rtvox.models.bundle).

    models/<name>/
      config.json              ARModelConfig: "family": "ar", name, version, audio constants, vocab size,
                               skip_symbols, default_voice, and the configs of the GPT ("ar"), the codec ("codec"),
                               the vocoder ("vocoder") and the emotion table ("emotion")
      ar.safetensors           ARDecoder weights (fp16; like every module, split into ar-00001-of-0000n.safetensors
                               when over 16 MiB)
      codec.safetensors        MelCodec weights: FSQ tokenizer + speaker-conditioned token-to-mel decoder (fp16)
      vocoder.safetensors      the shared vocoder (HiFi-GAN or Vocos), plain weights (fp16)
      emotion.safetensors      "table.*" = EmotionTable only: the AR family has no reference-clip emotion encoder
      vocab.json, voices.safetensors, voices.json, MODEL_CARD.md    as in the default family

A directory whose config.json has no "family" key is the default (FastSpeech2) family; `load_bundle` reads either.
Loading, saving and every check reuse the default family's helpers (meta-device build, assign from mmap'd
safetensors, sharding, atomic writes, ModelError naming the file and the fix).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rtvox.constants import EMOTIONS, HOP_LENGTH, N_MELS, SAMPLE_RATE, SPEAKER_EMBED_DIM
from rtvox.errors import ModelError
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.ar import ARConfig, ARDecoder
from rtvox.models.bundle import (
    _FIX,
    CARD_NAME,
    CONFIG_NAME,
    FORMAT_VERSION,
    MAX_FILE_BYTES,
    VOCAB_NAME,
    BundleParts,
    ModelBundle,
    _assign,
    _materialize_buffers,
    _read_json,
    _write_json,
    check_audio_constants,
    check_config_keys,
    infer_vocab_size,
    load_voices_and_card,
    load_weights,
    random_voices,
    save_voices,
    save_weights,
)
from rtvox.models.codec import CodecConfig, MelCodec
from rtvox.models.emotion import EmotionConfig, EmotionTable
from rtvox.models.layers import count_parameters
from rtvox.models.vocoder import AnyVocoder, AnyVocoderConfig, build_vocoder, vocoder_config_from_dict, vocoder_preset
from rtvox.text.vocab import Vocabulary

FAMILY = "ar"  # config.json "family" of this format


@dataclass(frozen=True)
class ARModelConfig:
    """config.json of an AR model directory: identity, audio constants and the configs of every component."""

    name: str
    version: str
    vocab_size: int  # phoneme vocabulary size; equals ar.text_vocab
    ar: ARConfig
    codec: CodecConfig
    vocoder: AnyVocoderConfig
    emotion: EmotionConfig  # only the table's shape matters (embed_dim sets the condition width)
    family: str = FAMILY
    sample_rate: int = SAMPLE_RATE
    hop_length: int = HOP_LENGTH
    n_mels: int = N_MELS
    default_voice: str | None = None  # None → the first built-in voice
    skip_symbols: tuple[str, ...] = ()  # frontend symbols the GPT never sees (the AR trainer drops #1 and #2)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.family != FAMILY:
            raise ValueError(f"family={self.family!r}; this config describes the {FAMILY!r} family")
        if self.ar.text_vocab != self.vocab_size:
            raise ValueError(f"ar.text_vocab={self.ar.text_vocab} but vocab_size={self.vocab_size}")
        if self.ar.n_codes != self.codec.n_tokens:
            raise ValueError(f"ar.n_codes={self.ar.n_codes} but the codec makes {self.codec.n_tokens} tokens")
        if self.ar.advances != (self.codec.advances if self.codec.pointer else 0):
            raise ValueError(f"ar.advances={self.ar.advances}; the codec's pointer tokens have {self.codec.advances}")
        if self.ar.cond_dim != self.emotion.cond_dim:
            raise ValueError(f"ar.cond_dim={self.ar.cond_dim}, speaker + emotion give {self.emotion.cond_dim}")
        if self.codec.speaker_dim != SPEAKER_EMBED_DIM:
            raise ValueError(f"codec.speaker_dim={self.codec.speaker_dim}; speakers are {SPEAKER_EMBED_DIM}-dim")
        if not self.codec.n_mels == self.vocoder.n_mels == self.n_mels:
            raise ValueError("n_mels differs between the codec, the vocoder and the model")

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("ar", "codec", "vocoder", "emotion"):
            data[key] = data[key].to_dict()
        data["skip_symbols"] = list(self.skip_symbols)
        return {"family": self.family, **data}  # first, so a reader sees the family at once

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ARModelConfig:
        data = check_config_keys(cls, data, {"family", "name", "version", "vocab_size", "ar", "codec", "vocoder"})
        data["ar"] = ARConfig.from_dict(data["ar"])
        data["codec"] = CodecConfig.from_dict(data["codec"])
        data["vocoder"] = vocoder_config_from_dict(data["vocoder"])
        data["emotion"] = EmotionConfig.from_dict(data.get("emotion", {}))
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:
            raise ModelError(f"{CONFIG_NAME} is inconsistent: {e}") from e


class ARBundle(BundleParts):
    """A loaded AR model directory. Owns the GPT, the codec, the vocoder and the emotion table (eval mode, on one
    device and dtype), the built-in voices ({name: embedding [256]} + their metadata) and the vocab dict.

    A container, like ModelBundle (same attribute names for what both families have); decoding is
    rtvox.runtime.ar's engine, the chunk step rtvox.runtime.ar_steps."""

    def __init__(
        self,
        config: ARModelConfig,
        ar: ARDecoder,
        codec: MelCodec,
        vocoder: AnyVocoder,
        emotion_table: EmotionTable,
        voices: dict[str, Tensor],
        voices_meta: list[dict[str, Any]],
        vocab: dict[str, Any],
        *,
        path: Path | None = None,
        model_card: str = "",
    ) -> None:
        super().__init__(vocoder, emotion_table, voices, voices_meta, vocab, path, model_card)
        self.config = config
        self.ar = ar
        self.codec = codec

    def parameter_counts(self) -> dict[str, int]:
        modules = {"ar": self.ar, "codec": self.codec, "vocoder": self.vocoder, "emotion": self.emotion_table}
        return {name: count_parameters(module) for name, module in modules.items()}

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> ARBundle:
        directory = Path(path)
        raw = _read_json(directory / CONFIG_NAME)
        if not isinstance(raw, dict):
            raise ModelError(f"{directory / CONFIG_NAME} must hold a JSON object; {_FIX}")
        config = ARModelConfig.from_dict(raw)
        check_audio_constants(config)
        vocab = _read_json(directory / VOCAB_NAME)
        device = torch.device(device)
        with torch.device("meta"):
            ar = ARDecoder(config.ar)
            codec = MelCodec(config.codec)
            vocoder = build_vocoder(config.vocoder)
            table = EmotionTable(config.emotion)
        for stem, module in (("ar", ar), ("codec", codec), ("vocoder", vocoder)):
            _assign(module, load_weights(directory, stem, device, dtype), f"{directory}/{stem}*.safetensors")
        _materialize_buffers(codec, lambda: MelCodec(config.codec), device)  # the FSQ's level tables
        _materialize_buffers(vocoder, lambda: build_vocoder(config.vocoder), device)
        emotion = load_weights(directory, "emotion", device, dtype)
        where = f"{directory}/emotion*.safetensors"
        if unknown := sorted(k for k in emotion if not k.startswith("table.")):
            raise ModelError(f"{where} has unexpected tensors {unknown[:3]} (an AR model keeps the table only); {_FIX}")
        _assign(table, {k.removeprefix("table."): v for k, v in emotion.items()}, where)
        voices, voices_meta, card = load_voices_and_card(directory, config.default_voice, device, dtype)
        return cls(config, ar, codec, vocoder, table, voices, voices_meta, vocab, path=directory, model_card=card)

    def save(self, path: str | os.PathLike[str], *, max_file_bytes: int = MAX_FILE_BYTES) -> Path:
        """Write this bundle as a model directory (fp16 weights, atomic files); returns the directory."""
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        save_voices(directory, self.voices, self.voices_meta, max_file_bytes)
        save_weights(directory, "ar", self.ar.state_dict(), max_file_bytes)
        save_weights(directory, "codec", self.codec.state_dict(), max_file_bytes)
        save_weights(directory, "vocoder", self.vocoder.inference_state_dict(), max_file_bytes)
        table = {f"table.{k}": v for k, v in self.emotion_table.state_dict().items()}
        save_weights(directory, "emotion", table, max_file_bytes)
        _write_json(directory / VOCAB_NAME, self.vocab)
        atomic_write_bytes(directory / CARD_NAME, (self.model_card or self._default_card()).encode("utf-8"))
        _write_json(directory / CONFIG_NAME, self.config.to_dict())  # last: a directory with config.json is whole
        return directory

    def _default_card(self) -> str:
        counts = ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in self.parameter_counts().items())
        voices = ", ".join(self.voices) or "(none)"
        return (
            f"# {self.config.name} {self.config.version}\n\n"
            f"rtvox autoregressive model (GPT over FSQ mel codes + codec + vocoder), {SAMPLE_RATE} Hz. "
            f"Parameters: {counts}.\n\nBuilt-in voices: {voices}. Emotions: {', '.join(EMOTIONS)} (labels only).\n"
        )


def load_bundle(
    path: str | os.PathLike[str], device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> ModelBundle | ARBundle:
    """Load a model directory of either family, by config.json's "family" (absent: the default family)."""
    raw = _read_json(Path(path) / CONFIG_NAME)
    family = raw.get("family") if isinstance(raw, dict) else None
    if family is None:
        return ModelBundle.load(path, device, dtype)
    if family == FAMILY:
        return ARBundle.load(path, device, dtype)
    raise ModelError(f"{CONFIG_NAME}: unknown model family {family!r}; this rtvox reads the default one and {FAMILY!r}")


def make_random_ar_bundle(
    path: str | os.PathLike[str],
    vocab: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    voices: dict[str, dict[str, Any]] | None = None,
    skip_symbols: tuple[str, ...] = (),
    pointer: bool = False,
) -> ARBundle:
    """Write a random-weight AR model directory (tiny presets) at `path` and load it back: for tests, never speech.

    vocab: the vocabulary dict to store (default: rtvox's phoneme vocabulary, which the tiny preset's 40-symbol
    text embedding is widened to, so the model takes the frontend's real ids)."""
    vocab = vocab if vocab is not None else Vocabulary.default().to_dict()
    emotion = EmotionConfig.preset("tiny")
    text_vocab = infer_vocab_size(vocab)
    codec_config = CodecConfig.preset("pointer-tiny" if pointer else "tiny")
    if pointer:
        codec_config = dataclasses.replace(codec_config, text_vocab=text_vocab)
    ar_config = ARConfig.preset(
        "tiny",
        text_vocab=text_vocab,
        n_codes=codec_config.n_tokens,
        cond_dim=emotion.cond_dim,
        advances=codec_config.advances if pointer else 0,
    )
    config = ARModelConfig(
        name="rtvox-random-ar-tiny",
        version="0.0.0",
        vocab_size=ar_config.text_vocab,
        ar=ar_config,
        codec=codec_config,
        vocoder=vocoder_preset("tiny"),
        emotion=emotion,
        skip_symbols=skip_symbols,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ar, codec = ARDecoder(config.ar).eval(), MelCodec(config.codec).eval()
        vocoder, table = build_vocoder(config.vocoder).eval(), EmotionTable(config.emotion).eval()
        embeddings, meta = random_voices(voices)
    card = f"# {config.name}\n\nRandom weights for tests and CI (seed {seed}); it does not speak.\n"
    bundle = ARBundle(config, ar, codec, vocoder, table, embeddings, meta, vocab, model_card=card)
    return ARBundle.load(bundle.save(path))
