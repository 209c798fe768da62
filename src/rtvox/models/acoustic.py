"""FastSpeech2-style acoustic model: phoneme ids + a condition vector -> 80-bin log-mel frames.

    phonemes [B, N] ─embed─► encoder (FFT blocks, conditional LN on cond) ─► + proj(cond)
      ─► variance adaptor (duration, pitch, energy; phoneme level) ─► hidden [B, N, D], durations [B, N]
      ─► length regulator ─► frames [B, T, D] ─► decoder (FFT blocks) ─► linear (+ postnet) ─► mel [B, 80, T]

Conditioning: `cond[B, C]` is the speaker embedding concatenated with the α-weighted emotion embedding
(`rtvox.models.emotion.fuse_condition`). It drives the scale and shift of every layer norm in the encoder
(AdaSpeech's conditional LN, initialized to a plain LN) and is projected and added to the encoder output, so
the variance predictors and the decoder see it through the hidden states. The decoder takes no condition of
its own: that keeps `decode(hidden, durations)` a function of `encode`'s outputs only.

Durations: training takes integer frames per phoneme summing to the mel length, from the trainer's own
monotonic alignment search (rtvox.training.align) or any external forced aligner; the inference path does not
depend on where they came from.

Export: `encode` is export-clean, its output shapes follow the input ([B, N, D] and [B, N]). `decode` has a
data-dependent frame count T = max(sum(durations)) (fine for torch.export and ONNX; Inductor's CUDA attention
cannot lower it) unless the caller passes `max_frames`; `decode_masked` takes T from a frame-mask input, so
every shape comes from the inputs: that is the half to compile (AcousticEncodeStep / AcousticDecodeStep wrap
both as modules). `infer` = `encode` + `decode`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.constants import N_MELS, SPEAKER_EMBED_DIM
from rtvox.errors import InputError
from rtvox.models.layers import (
    ChannelLayerNorm,
    FFTStack,
    config_from_dict,
    config_to_dict,
    masked_fill_zero,
)
from rtvox.models.variance import (
    FRAME_POSITION_FEATURES,
    VarianceAdaptor,
    frame_positions,
    length_regulate,
    total_frames,
)

# Mel frames past a sequence's end hold the log-mel of silence (log of rtvox.audio.mel.LOG_MEL_FLOOR, 1e-5;
# mirrored rather than imported so the model does not pull in the audio codecs; a test keeps the two equal).
MEL_PAD_VALUE = math.log(1e-5)


@dataclass(frozen=True)
class AcousticConfig:
    """Hyper-parameters of the acoustic model; stored under "acoustic" in the model's config.json."""

    vocab_size: int = 256  # phoneme vocabulary size (ids 0..vocab_size-1); set from the model's vocab
    pad_id: int = 0  # id used for padding (its embedding stays zero)
    dim: int = 256  # model width D
    n_heads: int = 2
    encoder_layers: int = 4
    decoder_layers: int = 4
    ff_dim: int = 1024  # conv FFN hidden channels
    ff_kernels: tuple[int, int] = (9, 1)  # conv FFN kernel sizes (FastSpeech: 9 then 1)
    # The decoder runs at the frame rate (93.75/s, ~8x the phoneme rate), so its FFN kernel sets most of the
    # model's cost; None = the same as ff_kernels.
    decoder_ff_kernels: tuple[int, int] | None = None
    variance_channels: int = 256
    variance_kernel: int = 3
    postnet_layers: int = 5  # 0 = no postnet
    postnet_channels: int = 256
    postnet_kernel: int = 5
    dropout: float = 0.1
    cond_dim: int = SPEAKER_EMBED_DIM + 128  # speaker ⊕ emotion; must match the emotion config
    n_mels: int = N_MELS
    # add each frame's position inside its phoneme (variance.frame_positions, through a linear layer that starts
    # at zero, so a model trained without it loads and runs unchanged) to the length-regulated frames
    frame_position: bool = False
    # (low, high) speaker z-scores the rendered phoneme pitch is clamped to at inference, after the prosody prior
    # and the request's pitch scale: the range the pitch embedding saw in training (set from the data by
    # rtvox.training.prosody_prior.pitch_bounds); None = unbounded (as every model before rtvox-small 8.1.0)
    pitch_bounds: tuple[float, float] | None = None

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # ~0.2M parameters: unit tests and CI.
        "tiny": dict(
            dim=32,
            n_heads=2,
            encoder_layers=1,
            decoder_layers=1,
            ff_dim=64,
            ff_kernels=(3, 1),
            variance_channels=32,
            postnet_layers=2,
            postnet_channels=32,
            dropout=0.0,
            cond_dim=SPEAKER_EMBED_DIM + 16,
        ),
        # ~20M parameters.
        "base": dict(ff_dim=768),
        # ~2M parameters, ~0.5M multiply-adds per mel frame: trainable on a CPU (the fallback when no GPU is lent).
        "mini": dict(
            dim=128,
            encoder_layers=3,
            decoder_layers=3,
            ff_dim=512,
            ff_kernels=(5, 1),
            decoder_ff_kernels=(3, 1),
            variance_channels=128,
            postnet_layers=0,
            dropout=0.05,
        ),
        # ~17M parameters, ~6M multiply-adds per mel frame: the shipped default (2-core CPU real-time budget).
        "small": dict(
            ff_dim=768,
            decoder_ff_kernels=(5, 1),
            postnet_layers=3,
            dropout=0.05,
        ),
    }

    def __post_init__(self) -> None:
        if self.dim % self.n_heads or self.dim % 2:
            raise ValueError(f"dim={self.dim} must be even and divisible by n_heads={self.n_heads}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside the vocabulary of {self.vocab_size}")
        if self.cond_dim <= SPEAKER_EMBED_DIM:
            raise ValueError(f"cond_dim={self.cond_dim} leaves no room for an emotion part after the speaker's")
        if self.pitch_bounds is not None:
            ok = len(self.pitch_bounds) == 2
            low, high = self.pitch_bounds if ok else (0.0, 0.0)
            if not (ok and math.isfinite(low) and math.isfinite(high) and low < 0 < high):
                raise ValueError(f"pitch_bounds={self.pitch_bounds} must be two finite numbers, low < 0 < high")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> AcousticConfig:
        if name not in cls.PRESETS:
            raise InputError(f"unknown acoustic preset {name!r}; one of {', '.join(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AcousticConfig:
        return config_from_dict(cls, data, "acoustic")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)


@dataclass(frozen=True)
class AcousticTrainOutput:
    """What `forward_train` returns; `acoustic_losses` turns it into losses."""

    mel: Tensor  # [B, n_mels, T] decoder output before the postnet (T = max sum of teacher durations)
    mel_post: Tensor  # [B, n_mels, T] after the postnet (= mel without one)
    frame_mask: Tensor  # Bool[B, T]
    log_duration: Tensor  # [B, N] predicted log(1 + frames)
    pitch: Tensor  # [B, N] predicted normalized pitch
    energy: Tensor  # [B, N] predicted relative energy
    phoneme_mask: Tensor  # Bool[B, N]


class Postnet(nn.Module):
    """Residual conv refinement of the mel: (conv → channel LN → tanh) x (layers-1), then a conv to mels."""

    def __init__(self, n_mels: int, channels: int, layers: int, kernel: int, dropout: float) -> None:
        super().__init__()
        sizes = [n_mels] + [channels] * (layers - 1) + [n_mels]
        self.convs = nn.ModuleList([nn.Conv1d(a, b, kernel, padding=kernel // 2) for a, b in itertools.pairwise(sizes)])
        self.norms = nn.ModuleList([ChannelLayerNorm(channels) for _ in range(layers - 1)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, mel: Tensor, frame_mask: Tensor) -> Tensor:
        # mel: [B, n_mels, T] (0 at padding), frame_mask: Bool[B, T] -> residual [B, n_mels, T], 0 at padding
        m = frame_mask[:, None, :].to(mel.dtype)
        h = mel
        for conv, norm in zip(self.convs[:-1], self.norms, strict=True):
            h = self.dropout(torch.tanh(norm(conv(h)))) * m
        return self.convs[-1](h) * m


class AcousticModel(nn.Module):
    """FastSpeech2 acoustic model. Owns the phoneme embedding, encoder, variance adaptor, decoder and postnet.

    Inference: `encode` (phonemes → hidden + integer durations) and `decode` (→ mel) are the two export-clean
    halves an engine compiles; `infer` (also `forward`) runs both. Training: `forward_train` with teacher
    durations, pitch and energy, then `acoustic_losses`.
    """

    def __init__(self, config: AcousticConfig) -> None:
        super().__init__()
        self.config = cfg = config
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=cfg.pad_id)
        body = (cfg.dim, cfg.n_heads, cfg.ff_dim, cfg.ff_kernels, cfg.dropout)
        self.encoder = FFTStack(cfg.encoder_layers, *body, cond_dim=cfg.cond_dim)
        self.cond_proj = nn.Linear(cfg.cond_dim, cfg.dim)
        self.variance = VarianceAdaptor(
            cfg.dim, cfg.variance_channels, cfg.variance_kernel, cfg.dropout, pitch_bounds=cfg.pitch_bounds
        )
        dec_kernels = cfg.decoder_ff_kernels or cfg.ff_kernels
        self.decoder = FFTStack(cfg.decoder_layers, cfg.dim, cfg.n_heads, cfg.ff_dim, dec_kernels, cfg.dropout)
        self.mel_out = nn.Linear(cfg.dim, cfg.n_mels)
        self.frame_pos: nn.Linear | None = None
        if cfg.frame_position:
            self.frame_pos = nn.Linear(FRAME_POSITION_FEATURES, cfg.dim)
            nn.init.zeros_(self.frame_pos.weight)
            nn.init.zeros_(self.frame_pos.bias)
        self.postnet = (
            Postnet(cfg.n_mels, cfg.postnet_channels, cfg.postnet_layers, cfg.postnet_kernel, cfg.dropout)
            if cfg.postnet_layers > 0
            else None
        )

    # ------------------------------------------------------------------ shared halves
    def _encode_text(self, phonemes: Tensor, mask: Tensor, cond: Tensor) -> Tensor:
        # phonemes: Long[B, N], mask: Bool[B, N], cond: [B, C] -> [B, N, D], 0 at padding
        x = self.encoder(self.embed(phonemes), mask, cond)
        return masked_fill_zero(x + self.cond_proj(cond)[:, None, :], mask)

    def _regulate(self, hidden: Tensor, durations: Tensor, n_frames: int) -> tuple[Tensor, Tensor]:
        """length_regulate (+ the frame-position term when configured) -> (frames [B, T, D], frame_mask)."""
        frames, frame_mask, _ = length_regulate(hidden, durations, n_frames)
        if self.frame_pos is not None:
            position = self.frame_pos(frame_positions(durations, n_frames).to(frames.dtype))
            frames = masked_fill_zero(frames + position, frame_mask)
        return frames, frame_mask

    def _decode_frames(
        self, frames: Tensor, frame_mask: Tensor, states: list[Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        # frames: [B, T, D], frame_mask: Bool[B, T] -> (mel before postnet, mel after) each [B, n_mels, T]
        mel = self.mel_out(self.decoder(frames, frame_mask, states=states)).transpose(1, 2)  # [B, n_mels, T]
        mel = mel * frame_mask[:, None, :].to(mel.dtype)
        post = mel if self.postnet is None else mel + self.postnet(mel, frame_mask)
        pad = torch.full((), MEL_PAD_VALUE, dtype=mel.dtype, device=mel.device)
        keep = frame_mask[:, None, :]
        return torch.where(keep, mel, pad), torch.where(keep, post, pad)

    # ------------------------------------------------------------------ inference (export-clean)
    def encode(
        self,
        phonemes: Tensor,
        phoneme_mask: Tensor,
        cond: Tensor,
        speed: Tensor,
        target_frames: Tensor,
        pitch_scale: Tensor,
        energy_scale: Tensor,
        prosody: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """phonemes Long[B, N], phoneme_mask Bool[B, N], cond [B, C], speed [B], target_frames Long[B]
        (0 = free), pitch_scale [B], energy_scale [B], prosody [B, 4] (the emotion prosody prior's row:
        pitch shift, pitch range, energy shift, duration ratio; identity (0, 1, 0, 1))
        -> (hidden [B, N, D], durations Long[B, N]).

        Free rows get round(predicted / speed) frames, >= 1 per real phoneme; rows with target_frames > 0 get
        durations summing exactly to the target (speed ignored). Padding phonemes get 0 frames.
        """
        x = self._encode_text(phonemes, phoneme_mask, cond)
        hidden, durations = self.variance.infer(
            x, phoneme_mask, speed, target_frames, pitch_scale, energy_scale, prosody
        )
        return masked_fill_zero(hidden, phoneme_mask), durations

    def decode(self, hidden: Tensor, durations: Tensor, max_frames: int | None = None) -> Tensor:
        """hidden [B, N, D], durations Long[B, N] -> mel [B, n_mels, T], silence past each row's end.

        T = max(sum(durations)) (data-dependent: one host read) or `max_frames` when given (a static bucket;
        rows longer than it are cut).
        """
        n_frames = total_frames(durations) if max_frames is None else max_frames
        frames, frame_mask = self._regulate(hidden, durations, n_frames)
        return self._decode_frames(frames, frame_mask)[1]

    def decode_masked(
        self, hidden: Tensor, durations: Tensor, frame_mask: Tensor, states: list[Tensor] | None = None
    ) -> Tensor:
        """`decode` with every shape taken from the inputs: frame_mask Bool[B, T] (the caller's
        arange(T) < sum(durations), T a bucket) -> mel [B, n_mels, T]. Frames outside the mask are silence.

        What compiled engines should run: no host read, and T is an input dimension (a plain dynamic dim for
        torch.export / AOTInductor / ONNX / TensorRT profiles, or a CUDA-graph bucket). `states` (distillation
        only) receives each decoder block's output [B, T, D].
        """
        frames, regulated_mask = self._regulate(hidden, durations, frame_mask.shape[1])
        frame_mask = frame_mask & regulated_mask
        return self._decode_frames(masked_fill_zero(frames, frame_mask), frame_mask, states)[1]

    def infer(
        self,
        phonemes: Tensor,
        phoneme_mask: Tensor,
        cond: Tensor,
        speed: Tensor,
        target_frames: Tensor,
        pitch_scale: Tensor,
        energy_scale: Tensor,
        prosody: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Same inputs as `encode` -> (mel [B, n_mels, T], mel_lengths Long[B], durations Long[B, N])."""
        hidden, durations = self.encode(
            phonemes, phoneme_mask, cond, speed, target_frames, pitch_scale, energy_scale, prosody
        )
        return self.decode(hidden, durations), durations.sum(1), durations

    forward = infer

    # ------------------------------------------------------------------ training
    def forward_train(
        self,
        phonemes: Tensor,
        phoneme_mask: Tensor,
        cond: Tensor,
        durations: Tensor,
        pitch: Tensor,
        energy: Tensor,
    ) -> AcousticTrainOutput:
        """Teacher-forced pass: phonemes Long[B, N], phoneme_mask Bool[B, N], cond [B, C], teacher durations
        Long[B, N] (0 at padding, row sums = mel lengths), teacher pitch [B, N] and energy [B, N]."""
        x = self._encode_text(phonemes, phoneme_mask, cond)
        x, log_dur, pitch_pred, energy_pred = self.variance.forward_train(x, phoneme_mask, pitch, energy)
        frames, frame_mask = self._regulate(x, durations, total_frames(durations))
        mel, mel_post = self._decode_frames(frames, frame_mask)
        return AcousticTrainOutput(mel, mel_post, frame_mask, log_dur, pitch_pred, energy_pred, phoneme_mask)


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    # values and mask broadcastable -> scalar mean over masked-in elements
    weight = mask.to(values.dtype).expand_as(values)
    return (values * weight).sum() / weight.sum().clamp_min(1.0)


def acoustic_losses(
    out: AcousticTrainOutput, mel: Tensor, durations: Tensor, pitch: Tensor, energy: Tensor
) -> dict[str, Tensor]:
    """FastSpeech2 losses: L1 on mel before and after the postnet, MSE on log(1 + duration), pitch, energy.

    mel: target log-mel [B, n_mels, T'] with T' >= T (cut to the model's T); durations/pitch/energy: [B, N].
    """
    target = mel[:, :, : out.mel.shape[2]]
    frame_mask = out.frame_mask[:, None, :]
    ph = out.phoneme_mask
    losses = {
        "mel": _masked_mean((out.mel - target).abs(), frame_mask),
        "mel_post": _masked_mean((out.mel_post - target).abs(), frame_mask),
        "duration": _masked_mean(F.mse_loss(out.log_duration, torch.log1p(durations.float()), reduction="none"), ph),
        "pitch": _masked_mean(F.mse_loss(out.pitch, pitch, reduction="none"), ph),
        "energy": _masked_mean(F.mse_loss(out.energy, energy, reduction="none"), ph),
    }
    losses["total"] = sum(losses.values(), torch.zeros((), device=mel.device))
    return losses


class AcousticEncodeStep(nn.Module):
    """`AcousticModel.encode` as a module of its own (exporters take modules); shares the model's weights."""

    def __init__(self, model: AcousticModel) -> None:
        super().__init__()
        self.model = model
        self.train(model.training)

    def forward(
        self,
        phonemes: Tensor,
        phoneme_mask: Tensor,
        cond: Tensor,
        speed: Tensor,
        target_frames: Tensor,
        pitch_scale: Tensor,
        energy_scale: Tensor,
        prosody: Tensor,
    ) -> tuple[Tensor, Tensor]:
        return self.model.encode(phonemes, phoneme_mask, cond, speed, target_frames, pitch_scale, energy_scale, prosody)


class AcousticDecodeStep(nn.Module):
    """`AcousticModel.decode_masked` as a module: (hidden [B, N, D], durations Long[B, N], frame_mask
    Bool[B, T]) -> mel [B, n_mels, T]; shares the model's weights."""

    def __init__(self, model: AcousticModel) -> None:
        super().__init__()
        self.model = model
        self.train(model.training)

    def forward(self, hidden: Tensor, durations: Tensor, frame_mask: Tensor) -> Tensor:
        return self.model.decode_masked(hidden, durations, frame_mask)
