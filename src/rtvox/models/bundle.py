"""The model directory format and its loader (the default family; the autoregressive one's is models/ar_bundle.py).

    models/<name>/
      config.json              ModelConfig: name, version, audio constants, vocab size, per-component configs
      acoustic.safetensors     AcousticModel weights (fp16)
      vocoder.safetensors      HiFiGAN weights, plain (weight norm folded), fp16; a file over 16 MiB is split
                               into vocoder-00001-of-00002.safetensors, ... (any module may be sharded)
      emotion.safetensors      "encoder.*" = EmotionEncoder, "table.*" = EmotionTable (fp16)
      vocab.json               the phoneme vocabulary of the model (rtvox.text's format, opaque here)
      voices.safetensors       one fp16 tensor [SPEAKER_EMBED_DIM] per built-in voice, keyed by voice name
      voices.json              {"voices": [{name, gender, language, description, default_emotion}, ...]}
      MODEL_CARD.md            what the model is, how it was trained, its limits

Loading builds every module on the meta device (nothing initialized only to be overwritten), then assigns the
tensors read from safetensors, cast to the requested dtype on the requested device. Every problem with the
directory raises ModelError naming the file and the fix. Files are written atomically (temp file + rename).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as save_safetensors
from torch import Tensor, nn

from rtvox.constants import (
    DEFAULT_MODEL,
    EMOTIONS,
    HOP_LENGTH,
    N_MELS,
    SAMPLE_RATE,
    SPEAKER_EMBED_DIM,
    SPOKEN_LANGS,
)
from rtvox.errors import InputError, ModelError
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.acoustic import AcousticConfig, AcousticModel
from rtvox.models.emotion import EmotionConfig, EmotionEncoder, EmotionTable
from rtvox.models.layers import count_parameters
from rtvox.models.prosody import EmotionProsody, EmotionSpeakerShift
from rtvox.models.vocoder import (
    AnyVocoder,
    AnyVocoderConfig,
    build_vocoder,
    vocoder_config_from_dict,
    vocoder_preset,
)
from rtvox.text.vocab import phoneme_langs

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.json"
VOICES_NAME = "voices.safetensors"
VOICES_META_NAME = "voices.json"
CARD_NAME = "MODEL_CARD.md"
MODULES: tuple[str, ...] = ("acoustic", "vocoder", "emotion")  # weight file stems
LANGUAGE_RATE_MIN, LANGUAGE_RATE_MAX = 0.5, 2.0  # a config's natural-rate factors stay within the speed range
LEAD_IN_MAX_CHARS = 16  # config `lead_in`: a word and a pause, not a sentence
TIMBRE_MATCH_MAX = 2.0  # config `timbre_match`: past 1 the clone overshoots its reference's spectrum
EMOTION_STRENGTH_MIN, EMOTION_STRENGTH_MAX = 0.25, 2.0  # a label's calibrated strength, times the request's alpha
MAX_FILE_BYTES = 16 * 2**20  # per safetensors file; larger modules are sharded
_HEADER_BYTES_PER_TENSOR = 160  # generous estimate of one tensor's entry in a safetensors JSON header
_FIX = "copy the complete model directory again, or re-create it with ModelBundle.save"


@dataclass(frozen=True)
class ModelConfig:
    """config.json of a model directory: identity, audio constants and the configs of every component."""

    name: str
    version: str
    vocab_size: int  # phoneme vocabulary size; equals acoustic.vocab_size
    acoustic: AcousticConfig
    vocoder: AnyVocoderConfig
    emotion: EmotionConfig
    sample_rate: int = SAMPLE_RATE
    hop_length: int = HOP_LENGTH
    n_mels: int = N_MELS
    default_voice: str | None = None  # None → the first built-in voice
    # Frontend symbols the acoustic model never sees: they get 0 frames. Models trained with word and phrase
    # boundaries dropped (a learned aligner lets silent boundary tokens swallow speech) list ("#1", "#2").
    skip_symbols: tuple[str, ...] = ()
    # Data-derived per-emotion prosody applied at inference (rtvox.models.prosody); absent = identity.
    emotion_prosody: EmotionProsody = dataclasses.field(default_factory=EmotionProsody)
    # Per-emotion direction a label moves the voice's speaker embedding (rtvox.models.prosody); absent = none.
    emotion_speaker_shift: EmotionSpeakerShift = dataclasses.field(default_factory=EmotionSpeakerShift)
    # Natural speaking rate per language (phoneme tag "en", "zh"), multiplying the request's speed: 0.9 speaks that
    # language's phonemes 1/0.9 times as long. Absent languages: 1.0. Empty (the default) writes no key.
    language_rates: dict[str, float] = dataclasses.field(default_factory=dict)
    # Calibrated strength per emotion label: a label request at emotion_alpha a is conditioned at a × strength (the
    # prior, the speaker shift and the learned emotion row all scale with it), so alpha 1 is each label's calibrated
    # default. Absent labels: 1.0. Empty (the default) writes no key.
    emotion_strength: dict[str, float] = dataclasses.field(default_factory=dict)
    # Timbre matching of cloned voices (rtvox.runtime.timbre): the share of the gap between a reference clip's mean
    # log-mel and the model's own rendering of its embedding that is added to a clone's mel. 0 (the default, no
    # key written) leaves clones as the embedding alone makes them.
    timbre_match: float = 0.0
    # A throw-away lead-in per language tag ("en", "zh"): a short word and a pause spoken before every chunk whose
    # first phoneme is of that language and cut off its audio, for models that render a chunk's first phoneme as
    # lead-in silence (docs/QUALITY.md, "A lead-in"). Empty (the default) writes no key.
    lead_in: dict[str, str] = dataclasses.field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    # whole-model preset → (acoustic, vocoder, emotion) presets
    PRESETS: ClassVar[dict[str, tuple[str, str, str]]] = {
        "tiny": ("tiny", "tiny", "tiny"),  # tests and CI
        "base": ("base", "v1", "base"),  # the shipped quality model
        "light": ("base", "light", "base"),  # same acoustic model, 15x smaller vocoder
        "small": ("small", "vocos-small", "base"),
        "mini": ("mini", "vocos-mini", "base"),  # CPU-trainable fallback  # the shipped default: fast on a 2-core CPU
    }

    def __post_init__(self) -> None:
        if self.acoustic.vocab_size != self.vocab_size:
            raise ValueError(f"acoustic.vocab_size={self.acoustic.vocab_size} but vocab_size={self.vocab_size}")
        if self.acoustic.cond_dim != self.emotion.cond_dim:
            raise ValueError(
                f"acoustic.cond_dim={self.acoustic.cond_dim}, speaker + emotion give {self.emotion.cond_dim}"
            )
        if not self.acoustic.n_mels == self.vocoder.n_mels == self.emotion.n_mels == self.n_mels:
            raise ValueError("n_mels differs between the components")
        for lang, rate in self.language_rates.items():
            if not isinstance(lang, str) or isinstance(rate, bool) or not isinstance(rate, int | float):
                raise ValueError("language_rates must map language tags to numbers")
            if not LANGUAGE_RATE_MIN <= rate <= LANGUAGE_RATE_MAX:
                bounds = f"{LANGUAGE_RATE_MIN}-{LANGUAGE_RATE_MAX}"
                raise ValueError(f"language_rates[{lang!r}] = {rate} is outside {bounds}")
        match = self.timbre_match
        if isinstance(match, bool) or not isinstance(match, int | float) or not 0.0 <= match <= TIMBRE_MATCH_MAX:
            raise ValueError(f"timbre_match = {match!r} must be a number from 0 to {TIMBRE_MATCH_MAX}")
        for lang, text in self.lead_in.items():
            if lang not in SPOKEN_LANGS or not isinstance(text, str) or not 0 < len(text.strip()) <= LEAD_IN_MAX_CHARS:
                raise ValueError(
                    f"lead_in[{lang!r}] must be a text of 1-{LEAD_IN_MAX_CHARS} characters, for language zh or en"
                )
        for label, strength in self.emotion_strength.items():
            if label not in EMOTIONS or label == "neutral":
                labels = ", ".join(EMOTIONS[1:])
                raise ValueError(f"emotion_strength names {label!r}; use emotion labels other than neutral: {labels}")
            if isinstance(strength, bool) or not isinstance(strength, int | float):
                raise ValueError("emotion_strength must map emotion labels to numbers")
            if not EMOTION_STRENGTH_MIN <= strength <= EMOTION_STRENGTH_MAX:
                bounds = f"{EMOTION_STRENGTH_MIN}-{EMOTION_STRENGTH_MAX}"
                raise ValueError(f"emotion_strength[{label!r}] = {strength} is outside {bounds}")

    def label_alpha(self, emotion: str | None, alpha: float) -> float:
        """The strength a label request at `alpha` is conditioned at: alpha × the label's calibrated strength."""
        return float(alpha) * self.emotion_strength.get(emotion or "neutral", 1.0)

    def chunk_rate(self, phonemes: Sequence[str]) -> float:
        """The natural-rate factor of a chunk (multiplies the request's speed): 1 / the phoneme-count-weighted mean
        of 1 / rate over its tagged phonemes ("en:ʃ" → "en"), so a chunk's length grows as its phonemes' would."""
        if not self.language_rates:
            return 1.0
        langs = phoneme_langs(phonemes)
        if not langs:
            return 1.0
        stretch = sum(1.0 / self.language_rates.get(lang, 1.0) for lang in langs) / len(langs)
        return 1.0 / stretch

    @classmethod
    def preset(cls, preset: str, *, vocab_size: int, name: str | None = None, version: str = "0.1.0") -> ModelConfig:
        if preset not in cls.PRESETS:
            raise InputError(f"unknown model preset {preset!r}; one of {', '.join(cls.PRESETS)}")
        acoustic, vocoder, emotion = cls.PRESETS[preset]
        emotion_config = EmotionConfig.preset(emotion)
        return cls(
            name=name or f"rtvox-{preset}",
            version=version,
            vocab_size=vocab_size,
            acoustic=AcousticConfig.preset(acoustic, vocab_size=vocab_size, cond_dim=emotion_config.cond_dim),
            vocoder=vocoder_preset(vocoder),
            emotion=emotion_config,
        )

    def check_constants(self) -> None:
        """The model must use rtvox's audio constants (everything downstream assumes them)."""
        check_audio_constants(self)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("acoustic", "vocoder", "emotion"):
            data[key] = data[key].to_dict()
        data["skip_symbols"] = list(self.skip_symbols)
        for key in ("language_rates", "emotion_strength", "lead_in"):
            if data[key]:
                data[key] = dict(sorted(data[key].items()))
            else:  # as the empty priors below: no key, same model_hash as before the field existed
                del data[key]
        if not data["timbre_match"]:
            del data["timbre_match"]  # off: no key, same model_hash as before the field existed
        for key in ("emotion_prosody", "emotion_speaker_shift"):
            value = data[key].to_dict()
            if value:
                data[key] = value
            else:  # an empty one writes no key: config.json (and so model_hash) stays as before
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        data = check_config_keys(cls, data, {"name", "version", "vocab_size", "acoustic", "vocoder", "emotion"})
        data["acoustic"] = AcousticConfig.from_dict(data["acoustic"])
        data["vocoder"] = vocoder_config_from_dict(data["vocoder"])
        data["emotion"] = EmotionConfig.from_dict(data["emotion"])
        data["emotion_prosody"] = EmotionProsody.from_dict(data.get("emotion_prosody", {}))
        data["emotion_speaker_shift"] = EmotionSpeakerShift.from_dict(data.get("emotion_speaker_shift", {}))
        for key, what in (
            ("language_rates", "language -> rate"),
            ("emotion_strength", "emotion -> strength"),
            ("lead_in", "language -> text"),
        ):
            value = data.get(key, {})
            if not isinstance(value, dict):
                raise ModelError(f"{CONFIG_NAME}: {key} must be an object of {what}; {_FIX}")
            data[key] = dict(value)
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:
            raise ModelError(f"{CONFIG_NAME} is inconsistent: {e}") from e


def project_models_dir() -> Path:
    """The shipped models folder: $RTVOX_MODELS_DIR, else <repo>/models next to src/."""
    if env := os.environ.get("RTVOX_MODELS_DIR"):
        return Path(env)
    return Path(__file__).resolve().parents[3] / "models"


def resolve_model(model: str | os.PathLike[str] | None) -> Path:
    """A model directory: the path given, else a shipped model of that name, else the shipped default;
    ModelError when it holds no config.json."""
    if model is None:
        path = project_models_dir() / DEFAULT_MODEL
    else:
        path = Path(model)
        if not path.exists() and (project_models_dir() / str(model)).exists():
            path = project_models_dir() / str(model)
    if not (path / "config.json").is_file():
        raise ModelError(f"no model at {path} (config.json missing); pass --model DIR pointing at a model directory")
    return path


def check_audio_constants(config: Any) -> None:
    """A model config (any family) must use rtvox's audio constants: everything downstream assumes them."""
    for key, want in (("sample_rate", SAMPLE_RATE), ("hop_length", HOP_LENGTH), ("n_mels", N_MELS)):
        if getattr(config, key) != want:
            raise ModelError(
                f"{CONFIG_NAME}: {key}={getattr(config, key)} but this rtvox works at {key}={want}; "
                "use a model trained for these audio settings"
            )


def check_config_keys(cls: type, data: dict[str, Any], required: set[str]) -> dict[str, Any]:
    """The checks every family's config.json shares (required and unknown keys, format version, skip_symbols);
    returns a copy of `data` with skip_symbols as a tuple, component configs still raw."""
    data = dict(data)
    missing = sorted(required - set(data))
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if missing or unknown:
        raise ModelError(f"{CONFIG_NAME}: missing keys {missing}, unknown keys {unknown}; {_FIX}")
    if data.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise ModelError(f"{CONFIG_NAME}: format_version {data['format_version']} is newer; upgrade rtvox")
    skip = data.get("skip_symbols", ())
    if not isinstance(skip, list | tuple) or not all(isinstance(x, str) for x in skip):
        raise ModelError(f"{CONFIG_NAME}: skip_symbols must be a list of phoneme symbols; {_FIX}")
    data["skip_symbols"] = tuple(skip)
    return data


# ---------------------------------------------------------------------------------------------- file helpers
def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise ModelError(f"{path} is missing; {_FIX}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelError(f"{path} is not valid JSON ({e}); {_FIX}") from e


def _shard_name(stem: str, index: int, count: int) -> str:
    return f"{stem}.safetensors" if count == 1 else f"{stem}-{index:05d}-of-{count:05d}.safetensors"


def weight_files(directory: Path, stem: str) -> list[Path]:
    """The file(s) holding module `stem`: stem.safetensors or all of its shards, in order (ModelError if none,
    if shards are missing, or if both forms are present)."""
    single = directory / f"{stem}.safetensors"
    pattern = re.compile(rf"^{re.escape(stem)}-(\d{{5}})-of-(\d{{5}})\.safetensors$")
    shards = sorted(p for p in directory.glob(f"{stem}-*-of-*.safetensors") if pattern.match(p.name))
    if single.is_file() and shards:
        raise ModelError(f"{directory} holds both {single.name} and shards {shards[0].name}...; delete the stale one")
    if single.is_file():
        return [single]
    if not shards:
        raise ModelError(f"{single} is missing (no shards {stem}-0000k-of-0000n.safetensors either); {_FIX}")
    count = int(pattern.match(shards[0].name).group(2))  # type: ignore[union-attr]
    expected = [directory / _shard_name(stem, i, count) for i in range(1, count + 1)]
    if shards != expected:
        missing = sorted({p.name for p in expected} - {p.name for p in shards})
        raise ModelError(f"{directory}: shards of {stem} are incomplete or mixed (missing {missing}); {_FIX}")
    return expected


def _split_shards(state: dict[str, Tensor], max_bytes: int) -> list[dict[str, Tensor]]:
    shards: list[dict[str, Tensor]] = [{}]
    size = 0
    for key, tensor in state.items():
        cost = tensor.numel() * tensor.element_size() + len(key) + _HEADER_BYTES_PER_TENSOR
        if cost > max_bytes:
            raise ModelError(f"tensor {key} alone needs {cost} bytes, over the per-file limit of {max_bytes}")
        if shards[-1] and size + cost > max_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = tensor
        size += cost
    return shards


def save_weights(directory: Path, stem: str, state: dict[str, Tensor], max_bytes: int = MAX_FILE_BYTES) -> list[Path]:
    """Write `state` as fp16 (floating tensors) safetensors file(s) of at most `max_bytes` each; stale files
    of the same module are removed afterwards."""
    half = {
        k: (v.detach().to("cpu", torch.float16) if v.is_floating_point() else v.detach().cpu()).contiguous().clone()
        for k, v in state.items()
    }
    shards = _split_shards(half, max_bytes)
    written = []
    for i, shard in enumerate(shards, start=1):
        path = directory / _shard_name(stem, i, len(shards))
        # One metadata key only: safetensors writes several in random order, which would change model_hash.
        data = save_safetensors(shard, metadata={"format": "pt"})
        assert len(data) <= max_bytes, f"{path.name} is {len(data)} bytes; raise _HEADER_BYTES_PER_TENSOR"
        atomic_write_bytes(path, data)
        written.append(path)
    for old in [directory / f"{stem}.safetensors", *directory.glob(f"{stem}-*-of-*.safetensors")]:
        if old.is_file() and old not in written:
            old.unlink()
    return written


def load_weights(directory: Path, stem: str, device: torch.device, dtype: torch.dtype) -> dict[str, Tensor]:
    """All tensors of module `stem` (every shard), floating ones cast to `dtype`, on `device`."""
    state: dict[str, Tensor] = {}
    for path in weight_files(directory, stem):
        try:
            part = load_file(path, device=str(device))
        except (SafetensorError, OSError) as e:
            raise ModelError(f"{path} cannot be read as safetensors ({e}); {_FIX}") from e
        if overlap := sorted(set(part) & set(state)):
            raise ModelError(f"{path} repeats tensors {overlap[:3]} of another shard; {_FIX}")
        state.update({k: v.to(dtype) if v.is_floating_point() else v for k, v in part.items()})
    return state


def _assign(module: nn.Module, state: dict[str, Tensor], where: str) -> None:
    try:
        module.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise ModelError(f"{where} does not match {CONFIG_NAME}: {e}; {_FIX}") from e
    module.eval()


def _materialize_buffers(module: nn.Module, factory: Callable[[], nn.Module], device: torch.device) -> None:
    """Buffers that are not saved (persistent=False: fixed DFT bases, windows) stay on the meta device after
    ``load_state_dict(assign=True)``; compute them by building the module once for real and take its copies."""
    if not any(b.is_meta for b in module.buffers()):
        return
    with torch.device("cpu"):
        real = dict(factory().named_buffers())
    for name, buf in list(module.named_buffers()):
        if buf.is_meta:
            owner_name, _, leaf = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            owner.register_buffer(leaf, real[name].to(device), persistent=False)


def model_hash(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) over config.json, vocab.json and every module weight file: the identity of what the
    engines compute (voices and the model card are left out: adding a voice keeps compiled engines valid)."""
    directory = Path(path)
    files = [directory / CONFIG_NAME, directory / VOCAB_NAME]
    files += [p for stem in MODULES for p in weight_files(directory, stem)]
    digest = hashlib.sha256()
    for file in files:
        if not file.is_file():
            raise ModelError(f"{file} is missing; {_FIX}")
        digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- the bundle
class BundleParts:
    """What every model family's bundle holds besides its own networks: the vocoder, the emotion table, the
    built-in voices, the vocab dict and where it came from (ModelBundle and rtvox.models.ar_bundle.ARBundle)."""

    def __init__(
        self,
        vocoder: AnyVocoder,
        emotion_table: EmotionTable,
        voices: dict[str, Tensor],
        voices_meta: list[dict[str, Any]],
        vocab: dict[str, Any],
        path: Path | None,
        model_card: str,
    ) -> None:
        self.vocoder = vocoder
        self.emotion_table = emotion_table
        self.voices = voices  # name → [SPEAKER_EMBED_DIM]
        # one dict per voice, in listing order: name, gender, language, description, default_emotion
        self.voices_meta = voices_meta
        self.vocab = vocab
        self.path = path  # the directory it was loaded from, if any
        self.model_card = model_card

    @property
    def vocab_path(self) -> Path | None:
        return None if self.path is None else self.path / VOCAB_NAME


class ModelBundle(BundleParts):
    """A loaded model directory. Owns the acoustic model, vocoder, emotion encoder and table (eval mode, on
    one device and dtype), the built-in voices ({name: embedding [256]} + their metadata) and the vocab dict.

    It is a container: engines are built from its modules' methods (`acoustic.encode`, `acoustic.decode`,
    `vocoder`), conditioning is `rtvox.models.emotion.fuse_condition`.
    """

    def __init__(
        self,
        config: ModelConfig,
        acoustic: AcousticModel,
        vocoder: AnyVocoder,
        emotion_encoder: EmotionEncoder,
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
        self.acoustic = acoustic
        self.emotion_encoder = emotion_encoder

    def parameter_counts(self) -> dict[str, int]:
        return {
            "acoustic": count_parameters(self.acoustic),
            "vocoder": count_parameters(self.vocoder),
            "emotion": count_parameters(self.emotion_encoder) + count_parameters(self.emotion_table),
        }

    # ------------------------------------------------------------------ load
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> ModelBundle:
        directory = Path(path)
        if not directory.is_dir():
            raise ModelError(f"model directory {directory} does not exist; pass the folder that holds {CONFIG_NAME}")
        raw = _read_json(directory / CONFIG_NAME)
        if not isinstance(raw, dict):
            raise ModelError(f"{directory / CONFIG_NAME} must hold a JSON object; {_FIX}")
        if "family" in raw:
            raise ModelError(
                f"{directory} holds a {raw['family']!r}-family model, not the default family; load it with "
                "rtvox.models.ar_bundle.load_bundle (the Synthesizer does)"
            )
        config = ModelConfig.from_dict(raw)
        config.check_constants()
        vocab = _read_json(directory / VOCAB_NAME)
        device = torch.device(device)

        with torch.device("meta"):
            acoustic = AcousticModel(config.acoustic)
            vocoder = build_vocoder(config.vocoder)
            encoder = EmotionEncoder(config.emotion)
            table = EmotionTable(config.emotion)
        _assign(acoustic, load_weights(directory, "acoustic", device, dtype), f"{directory}/acoustic*.safetensors")
        _assign(vocoder, load_weights(directory, "vocoder", device, dtype), f"{directory}/vocoder*.safetensors")
        _materialize_buffers(acoustic, lambda: AcousticModel(config.acoustic), device)
        _materialize_buffers(vocoder, lambda: build_vocoder(config.vocoder), device)
        emotion = load_weights(directory, "emotion", device, dtype)
        where = f"{directory}/emotion*.safetensors"
        _assign(encoder, {k[8:]: v for k, v in emotion.items() if k.startswith("encoder.")}, where)
        _assign(table, {k[6:]: v for k, v in emotion.items() if k.startswith("table.")}, where)
        if unknown := sorted(k for k in emotion if not k.startswith(("encoder.", "table."))):
            raise ModelError(f"{where} has unexpected tensors {unknown[:3]}; {_FIX}")

        voices, voices_meta, card = load_voices_and_card(directory, config.default_voice, device, dtype)
        return cls(
            config,
            acoustic,
            vocoder,
            encoder,
            table,
            voices,
            voices_meta,
            vocab,
            path=directory,
            model_card=card,
        )

    # ------------------------------------------------------------------ save
    def save(self, path: str | os.PathLike[str], *, max_file_bytes: int = MAX_FILE_BYTES) -> Path:
        """Write this bundle as a model directory (fp16 weights, atomic files); returns the directory."""
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        save_voices(directory, self.voices, self.voices_meta, max_file_bytes)
        save_weights(directory, "acoustic", self.acoustic.state_dict(), max_file_bytes)
        save_weights(directory, "vocoder", self.vocoder.inference_state_dict(), max_file_bytes)
        emotion = {f"encoder.{k}": v for k, v in self.emotion_encoder.state_dict().items()}
        emotion |= {f"table.{k}": v for k, v in self.emotion_table.state_dict().items()}
        save_weights(directory, "emotion", emotion, max_file_bytes)
        _write_json(directory / VOCAB_NAME, self.vocab)
        atomic_write_bytes(directory / CARD_NAME, (self.model_card or self._default_card()).encode("utf-8"))
        # Written last, so a fresh directory that has config.json is complete.
        _write_json(directory / CONFIG_NAME, self.config.to_dict())
        return directory

    def _default_card(self) -> str:
        counts = ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in self.parameter_counts().items())
        voices = ", ".join(sorted(self.voices)) or "(none)"
        return (
            f"# {self.config.name} {self.config.version}\n\n"
            f"rtvox FastSpeech2 + HiFi-GAN model, {SAMPLE_RATE} Hz. Parameters: {counts}.\n\n"
            f"Built-in voices: {voices}. Emotions: {', '.join(EMOTIONS)}.\n"
        )


def save_voices(directory: Path, voices: dict[str, Tensor], meta: list[dict[str, Any]], max_bytes: int) -> None:
    """voices.safetensors (one embedding per voice) + voices.json (their metadata, in listing order)."""
    if sorted(voices) != sorted(m["name"] for m in meta):
        raise ModelError("voices and voices_meta name different voices; give every voice one metadata entry")
    save_weights(directory, "voices", {k: v.reshape(-1) for k, v in voices.items()}, max_bytes)
    _write_json(directory / VOICES_META_NAME, {"voices": meta})


def load_voices_and_card(
    directory: Path, default_voice: str | None, device: torch.device, dtype: torch.dtype
) -> tuple[dict[str, Tensor], list[Any], str]:
    """What every model family's directory holds beside its weights: the voices (checked against the config's
    default voice) and the model card ("" when absent)."""
    voices, voices_meta = _load_voices(directory, device, dtype)
    if default_voice is not None and default_voice not in voices:
        raise ModelError(f"{CONFIG_NAME}: default_voice {default_voice!r} is not in {VOICES_NAME}")
    card_path = directory / CARD_NAME
    return voices, voices_meta, card_path.read_text(encoding="utf-8") if card_path.is_file() else ""


def _load_voices(directory: Path, device: torch.device, dtype: torch.dtype) -> tuple[dict[str, Tensor], list[Any]]:
    meta_path = directory / VOICES_META_NAME
    meta = _read_json(meta_path)
    entries = meta.get("voices") if isinstance(meta, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "name" in e for e in entries):
        raise ModelError(f'{meta_path} must be {{"voices": [{{"name": ...}}, ...]}}; {_FIX}')
    for entry in entries:
        if entry.get("default_emotion", "neutral") not in EMOTIONS:
            raise ModelError(f"{meta_path}: voice {entry['name']!r} has unknown default_emotion; use one of {EMOTIONS}")
    voices = load_weights(directory, "voices", device, dtype)
    for name, embedding in voices.items():
        if tuple(embedding.shape) != (SPEAKER_EMBED_DIM,):
            raise ModelError(
                f"{VOICES_NAME}: voice {name!r} has shape {tuple(embedding.shape)}, "
                f"expected ({SPEAKER_EMBED_DIM},) (a GE2E embedding)"
            )
    names = [e["name"] for e in entries]
    if sorted(names) != sorted(voices):
        raise ModelError(f"{VOICES_META_NAME} lists {sorted(names)} but {VOICES_NAME} holds {sorted(voices)}")
    ordered = {name: voices[name] for name in names}  # voices.json order is the listing order
    return ordered, entries


# ---------------------------------------------------------------------------------------------- test models
_DEFAULT_VOICES: dict[str, dict[str, Any]] = {
    "test_female": {"gender": "female", "language": "zh,en", "description": "random test voice"},
    "test_male": {"gender": "male", "language": "zh,en", "description": "random test voice"},
}


def infer_vocab_size(vocab: dict[str, Any]) -> int:
    """Vocabulary size of a vocab dict: len(vocab["symbols"]) if that is a list, else max id + 1 of a flat
    {symbol: id} mapping. Pass vocab_size explicitly for any other layout."""
    symbols = vocab.get("symbols")
    if isinstance(symbols, list):
        return len(symbols)
    if vocab and all(isinstance(v, int) and not isinstance(v, bool) for v in vocab.values()):
        return max(vocab.values()) + 1
    raise InputError("cannot tell the vocabulary size from this vocab dict; pass vocab_size=", param="vocab_size")


def random_voices(voices: dict[str, dict[str, Any]] | None) -> tuple[dict[str, Tensor], list[dict[str, Any]]]:
    """Test voices (default: two): a random non-negative unit-norm embedding each, like GE2E's, from the current
    RNG, and their metadata entries."""
    voices = voices if voices is not None else _DEFAULT_VOICES
    embeddings = {name: torch.nn.functional.normalize(torch.randn(SPEAKER_EMBED_DIM).abs(), dim=0) for name in voices}
    meta = [{"name": name, "default_emotion": "neutral", **info} for name, info in voices.items()]
    return embeddings, meta


def make_random_bundle(
    path: str | os.PathLike[str],
    preset: str = "tiny",
    vocab: dict[str, Any] | None = None,
    seed: int = 0,
    voices: dict[str, dict[str, Any]] | None = None,
    *,
    vocab_size: int | None = None,
) -> ModelBundle:
    """Write a random-weight model directory at `path` and load it back: for tests and CI, never for speech.

    vocab: the vocabulary dict to store (default: a placeholder {"symbols": ["<pad>", "p1", ...]} of
    vocab_size or 64 entries). voices: name → metadata (gender, language, description, default_emotion);
    each gets a random non-negative unit-norm embedding, like GE2E's.
    """
    if vocab is None:
        vocab = {"symbols": ["<pad>", *(f"p{i}" for i in range(1, vocab_size or 64))]}
    size = vocab_size if vocab_size is not None else infer_vocab_size(vocab)
    config = ModelConfig.preset(preset, vocab_size=size, name=f"rtvox-random-{preset}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        acoustic = AcousticModel(config.acoustic).eval()
        vocoder = build_vocoder(config.vocoder).eval()
        encoder = EmotionEncoder(config.emotion).eval()
        table = EmotionTable(config.emotion).eval()
        embeddings, meta = random_voices(voices)
    card = f"# {config.name}\n\nRandom weights for tests and CI (seed {seed}); it does not speak.\n"
    bundle = ModelBundle(config, acoustic, vocoder, encoder, table, embeddings, meta, vocab, model_card=card)
    return ModelBundle.load(bundle.save(path))
