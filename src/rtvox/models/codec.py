"""Acoustic tokens for the autoregressive family: finite scalar quantization (FSQ) of mel frames, and the
non-autoregressive token-to-mel decoder conditioned on the speaker.

FSQ (Mentzer et al., 2023) bounds each of a few latent channels and rounds it to a fixed number of levels; the
code is the mixed-radix number of the rounded levels, so the codebook needs no learning, cannot collapse and has
exactly prod(levels) entries (8·5·5·5 = 1000 by default). The encoder downsamples mel frames (93.75/s) by 4 to
23.4 tokens/s, the rate IndexTTS-style GPTs work at. Rounding passes gradients straight through.

The decoder turns codes back into mel frames at the full rate, with the speaker embedding added to its input so
one token stream can be voiced by any speaker; the shared vocoder turns the mel into audio.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rtvox.models.layers import config_from_dict, config_to_dict


@dataclass(frozen=True)
class CodecConfig:
    """Shapes of the mel tokenizer (encoder + FSQ) and its token-to-mel decoder."""

    n_mels: int = 80
    dim: int = 256
    levels: tuple[int, ...] = (8, 5, 5, 5)
    downsample: int = 4  # mel frames per token (a power of two)
    blocks: int = 3  # residual conv blocks at each end
    speaker_dim: int = 256

    @property
    def n_codes(self) -> int:
        return math.prod(self.levels)

    def __post_init__(self) -> None:
        if self.downsample < 1 or self.downsample & (self.downsample - 1):
            raise ValueError(f"downsample must be a power of two, got {self.downsample}")
        if any(level < 2 for level in self.levels):
            raise ValueError(f"every FSQ level count must be ≥ 2, got {self.levels}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodecConfig:
        return config_from_dict(cls, data, "codec")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def preset(cls, name: str) -> CodecConfig:
        presets: dict[str, dict[str, Any]] = {"base": {}, "tiny": dict(dim=32, levels=(4, 4, 2), blocks=1)}
        if name not in presets:
            raise ValueError(f"unknown codec preset {name!r}; choose one of {sorted(presets)}")
        return dataclasses.replace(cls(), **presets[name])


class FSQ(nn.Module):
    """Finite scalar quantization over the last dimension: [..., len(levels)] -> values in [-1, 1] and codes."""

    _levels: Tensor
    _basis: Tensor

    def __init__(self, levels: tuple[int, ...]) -> None:
        super().__init__()
        self.levels = levels
        basis = [math.prod(levels[:i]) for i in range(len(levels))]
        self.register_buffer("_levels", torch.tensor(levels, dtype=torch.float32), persistent=False)
        self.register_buffer("_basis", torch.tensor(basis, dtype=torch.long), persistent=False)

    def _bound(self, z: Tensor) -> Tensor:
        # maps to a range whose rounding gives exactly L values per channel (even L: shifted by half a level)
        half = (self._levels - 1) * (1 + 1e-3) / 2
        offset = torch.where(self._levels % 2 == 0, 0.5, 0.0)
        shift = torch.atanh(offset / half)
        return torch.tanh(z + shift) * half - offset

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:
        bounded = self._bound(z.float())
        rounded = bounded + (bounded.round() - bounded).detach()  # straight-through
        half_width = torch.div(self._levels, 2, rounding_mode="floor")
        return rounded / half_width, self.to_codes(rounded.detach())

    def to_codes(self, rounded: Tensor) -> Tensor:
        half_width = torch.div(self._levels, 2, rounding_mode="floor")
        digits = (rounded + half_width).round().long()
        return (digits * self._basis).sum(-1)

    def from_codes(self, codes: Tensor) -> Tensor:
        """Long codes [...] -> normalized values [..., len(levels)] (what the decoder sees)."""
        digits = (codes[..., None] // self._basis) % self._levels.long()
        half_width = torch.div(self._levels, 2, rounding_mode="floor")
        return (digits.float() - half_width) / half_width


class ResBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(dim, dim, 5, padding=2), nn.GELU(), nn.Conv1d(dim, dim, 1), nn.GroupNorm(1, dim)
        )

    def forward(self, x: Tensor) -> Tensor:
        return x + self.net(x)


class MelCodec(nn.Module):
    """mel [B, 80, T] -> codes Long[B, T / downsample] -> mel [B, 80, T] (given a speaker embedding)."""

    def __init__(self, config: CodecConfig) -> None:
        super().__init__()
        self.config = config
        d, n = config.dim, len(config.levels)
        steps = int(math.log2(config.downsample))
        enc: list[nn.Module] = [nn.Conv1d(config.n_mels, d, 5, padding=2)]
        enc += [ResBlock(d) for _ in range(config.blocks)]
        enc += [nn.Conv1d(d, d, 4, stride=2, padding=1) for _ in range(steps)]
        enc += [nn.GELU(), nn.Conv1d(d, n, 1)]
        self.encoder = nn.Sequential(*enc)
        self.fsq = FSQ(config.levels)
        self.code_in = nn.Conv1d(n, d, 1)
        self.speaker = nn.Linear(config.speaker_dim, d)
        dec: list[nn.Module] = [nn.ConvTranspose1d(d, d, 4, stride=2, padding=1) for _ in range(steps)]
        dec += [ResBlock(d) for _ in range(config.blocks)]
        dec += [nn.Conv1d(d, config.n_mels, 5, padding=2)]
        self.decoder = nn.Sequential(*dec)

    def quantize(self, mel: Tensor) -> tuple[Tensor, Tensor]:
        """mel [B, 80, T] (T a multiple of downsample) -> (values [B, n, T/ds] with straight-through
        gradients, codes Long[B, T/ds])."""
        z = self.encoder(mel).transpose(1, 2)
        values, codes = self.fsq(z)
        return values.transpose(1, 2), codes

    def encode(self, mel: Tensor) -> Tensor:
        return self.quantize(mel)[1]

    def decode_values(self, values: Tensor, speaker: Tensor) -> Tensor:
        h = self.code_in(values.to(self.code_in.weight.dtype)) + self.speaker(speaker)[:, :, None]
        return self.decoder(h)

    def decode(self, codes: Tensor, speaker: Tensor) -> Tensor:
        """codes Long[B, N] + speaker [B, 256] -> mel [B, 80, N * downsample]."""
        return self.decode_values(self.fsq.from_codes(codes).transpose(1, 2), speaker)

    def forward(self, mel: Tensor, speaker: Tensor) -> tuple[Tensor, Tensor]:
        """Reconstruction for training: (mel [B, 80, T], codes)."""
        values, codes = self.quantize(mel)
        return self.decode_values(values, speaker), codes
