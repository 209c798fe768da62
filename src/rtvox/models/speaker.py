"""GE2E speaker encoder: 16 kHz speech -> one 256-d unit vector that describes the voice.

Architecture and weights are those of the `resemblyzer` package (Jemine's GE2E model: a 3-layer LSTM over
40-channel power mel frames, the last layer's final hidden state through linear + ReLU, L2-normalized). An
utterance is cut into overlapping 1.6 s partials; their embeddings are averaged and renormalized. The numbers
here reproduce resemblyzer's `embed_utterance` (tested to 1e-3 against it on real speech), but nothing
imports it: the mel frontend is our own torch code (`rtvox.audio.mel`), so no librosa at run time.

`SpeakerEncoder.forward` is the export-clean part (fixed-size partials in, embeddings out); slicing and
averaging live in `embed_utterance`, in numpy/Python around it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor, nn

from rtvox.audio.decode import resample
from rtvox.audio.loudness import db_to_gain, rms_dbfs
from rtvox.audio.mel import ConvSTFT, mel_filterbank
from rtvox.constants import SPEAKER_EMBED_DIM, SPEAKER_SAMPLE_RATE
from rtvox.errors import ModelError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "speaker_encoder.safetensors"
MODEL_TYPE = "ge2e"
MODELS_DIR_ENV = "RTVOX_MODELS_DIR"


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """Everything that defines the encoder's numbers; stored as config.json beside the weights."""

    sample_rate: int = SPEAKER_SAMPLE_RATE
    n_mels: int = 40
    window_ms: float = 25.0  # STFT window (= n_fft, Hann) in milliseconds
    hop_ms: float = 10.0  # frame step in milliseconds
    # Frames are centered on their sample by padding n_fft/2 on both sides. librosa >= 0.10 (what resemblyzer
    # runs on today) pads with zeros; the model was trained on librosa < 0.10, which reflected. Only the
    # first and last frame differ.
    pad_mode: str = "constant"
    partial_frames: int = 160  # frames per partial utterance (1.6 s)
    partials_per_second: float = 1.3  # how densely partials overlap
    min_coverage: float = 0.75  # a last partial must be this full of real audio, or it is dropped
    hidden_size: int = 256
    num_layers: int = 3
    embed_dim: int = SPEAKER_EMBED_DIM
    # resemblyzer raises quiet clips (never lowers loud ones) to this RMS before embedding; the model was
    # trained on audio leveled that way and its input (power mel, not log) is not level-invariant.
    min_level_dbfs: float = -30.0

    @property
    def n_fft(self) -> int:
        return int(self.sample_rate * self.window_ms / 1000)

    @property
    def hop_length(self) -> int:
        return int(self.sample_rate * self.hop_ms / 1000)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpeakerEncoderConfig:
        data = dict(data)
        model_type = data.pop("model_type", MODEL_TYPE)
        if model_type != MODEL_TYPE:
            raise ModelError(f"config is for a {model_type!r} model, not a {MODEL_TYPE!r} speaker encoder")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ModelError(f"unknown speaker encoder config keys {unknown}; known keys are {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": MODEL_TYPE, **asdict(self)}


def default_speaker_encoder_dir() -> Path:
    """models/ge2e under $RTVOX_MODELS_DIR if set, else under the project root (the folder holding src/)."""
    models_dir = os.environ.get(MODELS_DIR_ENV)
    if models_dir:
        return Path(models_dir) / MODEL_TYPE
    return Path(__file__).resolve().parents[3] / "models" / MODEL_TYPE


class SpeakerMel(nn.Module):
    """resemblyzer's encoder input: centered Hann STFT, power (not magnitude, not log), Slaney mel filters
    from 0 Hz to Nyquist. Owns only constant buffers, rebuilt from the config and never saved."""

    mel_basis: Tensor  # [n_mels, n_freq]

    def __init__(self, config: SpeakerEncoderConfig) -> None:
        super().__init__()
        self.pad = config.n_fft // 2
        self.pad_mode = config.pad_mode
        self.stft = ConvSTFT(config.n_fft, config.n_fft, config.hop_length)
        basis = mel_filterbank(config.sample_rate, config.n_fft, config.n_mels, 0.0, config.sample_rate / 2)
        self.register_buffer("mel_basis", torch.from_numpy(basis), persistent=False)

    def forward(self, wav: Tensor) -> Tensor:
        # wav: [B, T] -> mels: [B, 1 + T // hop, n_mels]
        padded = F.pad(wav, (self.pad, self.pad), mode=self.pad_mode)
        power = self.stft(padded)  # [B, n_freq, frames]
        return torch.matmul(self.mel_basis, power).transpose(1, 2)


class SpeakerEncoder(nn.Module):
    """GE2E speaker encoder: owns the LSTM + projection weights and the 16 kHz mel frontend.

    `forward` embeds fixed-size mel partials (export this); `embed_utterance` / `embed_reference` embed a
    whole waveform the way resemblyzer does. Load shipped weights with `SpeakerEncoder.load()`.
    """

    def __init__(self, config: SpeakerEncoderConfig | None = None) -> None:
        super().__init__()
        self.config = config or SpeakerEncoderConfig()
        cfg = self.config
        self.frontend = SpeakerMel(cfg)
        self.lstm = nn.LSTM(cfg.n_mels, cfg.hidden_size, cfg.num_layers, batch_first=True)
        self.linear = nn.Linear(cfg.hidden_size, cfg.embed_dim)

    def forward(self, mels: Tensor) -> Tensor:
        # mels: [B, partial_frames, n_mels] -> embeddings: [B, embed_dim], unit L2 norm, non-negative
        _, (hidden, _) = self.lstm(mels)  # hidden: [num_layers, B, hidden_size]
        embeds = F.relu(self.linear(hidden[-1]))
        return F.normalize(embeds, p=2.0, dim=1)

    def partial_starts(self, n_samples: int) -> list[int]:
        """First mel frame of each partial for an utterance of `n_samples` (at least one partial).

        Partials of `partial_frames` frames start every `sample_rate / partials_per_second` samples (rounded
        to frames) and cover the whole utterance; the last one, which may run past the end, is kept only if
        real audio fills at least `min_coverage` of it.
        """
        cfg = self.config
        hop = cfg.hop_length
        n_frames = math.ceil((n_samples + 1) / hop)
        step = round(cfg.sample_rate / cfg.partials_per_second / hop)
        if not 0 < step <= cfg.partial_frames:
            raise ValueError(f"partials_per_second={cfg.partials_per_second} gives a step of {step} frames")
        starts = list(range(0, max(1, n_frames - cfg.partial_frames + step + 1), step))
        coverage = (n_samples - starts[-1] * hop) / (cfg.partial_frames * hop)
        if len(starts) > 1 and coverage < cfg.min_coverage:
            starts.pop()
        return starts

    @torch.inference_mode()
    def embed_partials(self, wav: np.ndarray) -> np.ndarray:
        """Embeddings of every partial of a 16 kHz utterance: [n_partials, embed_dim] float32."""
        cfg = self.config
        wav = np.asarray(wav, dtype=np.float32)
        if wav.ndim != 1 or wav.shape[0] == 0:
            raise ValueError(f"expected non-empty mono audio of shape [T], got shape {wav.shape}")
        starts = self.partial_starts(wav.shape[0])
        # Zero-pad so the last partial's frames exist; the mel of the padded signal is what the model saw.
        needed = (starts[-1] + cfg.partial_frames) * cfg.hop_length
        if needed >= wav.shape[0]:
            wav = np.pad(wav, (0, needed - wav.shape[0]))
        device = self.frontend.mel_basis.device
        mel = self.frontend(torch.from_numpy(wav).to(device)[None])[0]  # [frames, n_mels]
        partials = torch.stack([mel[s : s + cfg.partial_frames] for s in starts])  # [P, partial_frames, n_mels]
        embeds: np.ndarray = self(partials).float().cpu().numpy()
        return embeds

    def embed_utterance(self, wav16k: np.ndarray) -> np.ndarray:
        """Speaker embedding of an already-leveled 16 kHz utterance: the renormalized mean of its partials'
        embeddings, [embed_dim] float32 with unit norm."""
        mean = self.embed_partials(wav16k).mean(axis=0)
        return (mean / np.linalg.norm(mean)).astype(np.float32)

    def embed_reference(self, wav: np.ndarray, sr: int) -> np.ndarray:
        """Speaker embedding of a mono clip at any rate: resampled to 16 kHz and raised to `min_level_dbfs`
        if quieter (as resemblyzer's preprocessing does, minus its VAD: trim silence beforehand)."""
        wav16k = resample(np.asarray(wav, dtype=np.float32), sr, self.config.sample_rate)
        level = rms_dbfs(wav16k)
        if np.isfinite(level) and level < self.config.min_level_dbfs:
            wav16k = wav16k * np.float32(db_to_gain(self.config.min_level_dbfs - level))
        return self.embed_utterance(wav16k)

    @classmethod
    def load(
        cls, model_dir: str | os.PathLike[str] | None = None, *, device: str | torch.device = "cpu"
    ) -> SpeakerEncoder:
        """Load config.json + speaker_encoder.safetensors from `model_dir` (default: models/ge2e).

        Weights may be stored in fp16 or fp32; compute is always fp32. Parameters are created on the meta
        device and replaced by the loaded tensors, so nothing is initialized only to be overwritten.
        """
        directory = Path(model_dir) if model_dir is not None else default_speaker_encoder_dir()
        config_path, weights_path = directory / CONFIG_NAME, directory / WEIGHTS_NAME
        for path in (config_path, weights_path):
            if not path.is_file():
                raise ModelError(
                    f"speaker encoder file {path} is missing; run `python recipes/convert_ge2e.py` to "
                    f"create it or set {MODELS_DIR_ENV} to a folder that holds {MODEL_TYPE}/"
                )
        config = SpeakerEncoderConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        with torch.device("meta"):
            model = cls(config)
        state = {name: t.to(torch.float32) for name, t in load_file(weights_path, device=str(device)).items()}
        try:
            model.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as e:
            raise ModelError(f"{weights_path} does not match its config: {e}") from e
        # The frontend's buffers come from numpy, so they are real (on the CPU) even under the meta device.
        return model.to(device).eval()
