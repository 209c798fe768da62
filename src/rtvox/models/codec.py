"""Acoustic tokens for the autoregressive family: finite scalar quantization (FSQ) of mel frames, and the
non-autoregressive token-to-mel decoder conditioned on the speaker.

FSQ (Mentzer et al., 2023) bounds each of a few latent channels and rounds it to a fixed number of levels; the
code is the mixed-radix number of the rounded levels, so the codebook needs no learning, cannot collapse and has
exactly prod(levels) entries (8·5·5·5 = 1000 by default). The encoder downsamples mel frames (93.75/s) by 4 to
23.4 tokens/s, the rate IndexTTS-style GPTs work at. Rounding passes gradients straight through.

The decoder turns codes back into mel frames at the full rate, with the speaker embedding added to its input so
one token stream can be voiced by any speaker; the shared vocoder turns the mel into audio.

Phoneme-pointer tokens (`text_vocab > 0`, `advances = A`): a mel-only code of ~234 bit/s spends its bits on
spectral detail, not on what was said (a round trip took Whisper from 10.6 to 55 % WER, docs/QUALITY.md), so,
as GPT-SoVITS's decoder reads the text beside its semantic tokens, this decoder also reads the phonemes. Each
token then names a code and how many phonemes the speech advanced during its 4 frames (0..A-1): the pointer
p_t (the phoneme under the token's last frame) is the running sum of the advances, and the decoder adds, to
token t's input, the mean of a small text encoder's outputs over phonemes p_{t-1}..p_t (p_{-1} = 0). The GPT
predicts `code · A + advance` (rtvox.models.ar), so which phoneme is being spoken is part of every token and
the content reaches the mel through the text, whatever the codes get wrong.
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
    text_vocab: int = 0  # > 0: the decoder reads the phonemes through pointer spans (phoneme-pointer tokens)
    advances: int = 0  # phoneme-pointer tokens: a token advances the pointer by 0..advances-1 phonemes

    @property
    def n_codes(self) -> int:
        return math.prod(self.levels)

    @property
    def pointer(self) -> bool:
        return self.text_vocab > 0

    @property
    def n_tokens(self) -> int:
        """The GPT's acoustic vocabulary: codes, times the advances with phoneme-pointer tokens."""
        return self.n_codes * (self.advances if self.pointer else 1)

    def __post_init__(self) -> None:
        if self.downsample < 1 or self.downsample & (self.downsample - 1):
            raise ValueError(f"downsample must be a power of two, got {self.downsample}")
        if any(level < 2 for level in self.levels):
            raise ValueError(f"every FSQ level count must be ≥ 2, got {self.levels}")
        if self.text_vocab > 0 and self.advances < 2:
            raise ValueError(f"phoneme-pointer tokens need advances ≥ 2, got {self.advances}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodecConfig:
        return config_from_dict(cls, data, "codec")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def preset(cls, name: str) -> CodecConfig:
        pointer = dict(text_vocab=325, advances=4)  # text_vocab: rtvox.text.vocab's size
        presets: dict[str, dict[str, Any]] = {
            "base": {},
            "tiny": dict(dim=32, levels=(4, 4, 2), blocks=1),
            "pointer": pointer,
            "pointer-small": dict(levels=(8, 5, 5), **pointer),  # 200 codes: the phonemes carry what was said
            "pointer-tiny": dict(dim=32, levels=(4, 4, 2), blocks=1, **pointer),
        }
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


def pointer_track(advances: Tensor, ph_len: Tensor) -> Tensor:
    """Advances Long[B, M] (0..A-1 per token) -> pointers Long[B, M]: the phoneme under each token's last frame,
    the running sum of the advances held inside 0..ph_len-1."""
    return advances.cumsum(1).clamp_max((ph_len - 1).clamp_min(0)[:, None])


def pointers_from_durations(durations: list[int], tokens: int, downsample: int, advances: int) -> list[int]:
    """The pointer of each of `tokens` tokens from phoneme durations in mel frames: the phoneme under the token's
    last frame, advancing at most advances-1 phonemes per token (a lagging pointer catches up on later tokens)."""
    ends, under, p = [], 0, 0
    for d in durations:
        under += d
        ends.append(under)  # frame index just past each phoneme
    out, prev = [], 0
    for t in range(tokens):
        last_frame = (t + 1) * downsample - 1
        while p < len(ends) - 1 and ends[p] <= last_frame:
            p += 1
        prev = min(p, prev + advances - 1)
        out.append(prev)
    return out


def split_tokens(tokens: Tensor, advances: int) -> tuple[Tensor, Tensor]:
    """Phoneme-pointer tokens Long[...] -> (codes, advances)."""
    return torch.div(tokens, advances, rounding_mode="floor"), tokens % advances


class TextSpans(nn.Module):
    """Phonemes -> per-token text input: a small conv encoder over the phonemes, averaged over each token's span
    [p_{t-1}, p_t] of the pointer track."""

    def __init__(self, vocab: int, dim: int, blocks: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.encoder = nn.Sequential(*(ResBlock(dim) for _ in range(blocks)))

    def forward(self, phonemes: Tensor, pointers: Tensor) -> Tensor:
        """phonemes Long[B, N], pointers Long[B, M] -> [B, dim, M]."""
        h = self.encoder(self.embed(phonemes).transpose(1, 2))  # [B, D, N]
        sums = torch.cat([torch.zeros_like(h[:, :, :1]), h.cumsum(2)], dim=2)  # [B, D, N + 1]
        lo = torch.cat([torch.zeros_like(pointers[:, :1]), pointers[:, :-1]], dim=1)
        hi = torch.maximum(pointers, lo)
        d = h.shape[1]
        top = sums.gather(2, (hi + 1)[:, None].expand(-1, d, -1))
        bottom = sums.gather(2, lo[:, None].expand(-1, d, -1))
        return (top - bottom) / (hi - lo + 1)[:, None].to(h.dtype)


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
        self.text = TextSpans(config.text_vocab, d, config.blocks) if config.pointer else None

    def quantize(self, mel: Tensor) -> tuple[Tensor, Tensor]:
        """mel [B, 80, T] (T a multiple of downsample) -> (values [B, n, T/ds] with straight-through
        gradients, codes Long[B, T/ds])."""
        z = self.encoder(mel).transpose(1, 2)
        values, codes = self.fsq(z)
        return values.transpose(1, 2), codes

    def encode(self, mel: Tensor) -> Tensor:
        return self.quantize(mel)[1]

    def decode_values(
        self, values: Tensor, speaker: Tensor, phonemes: Tensor | None = None, pointers: Tensor | None = None
    ) -> Tensor:
        h = self.code_in(values.to(self.code_in.weight.dtype)) + self.speaker(speaker)[:, :, None]
        if self.text is not None:
            if phonemes is None or pointers is None:
                raise ValueError("this codec reads the phonemes: pass phonemes and pointers")
            h = h + self.text(phonemes, pointers).to(h.dtype)
        return self.decoder(h)

    def decode(
        self, codes: Tensor, speaker: Tensor, phonemes: Tensor | None = None, pointers: Tensor | None = None
    ) -> Tensor:
        """codes Long[B, M] + speaker [B, 256] (+ phonemes Long[B, N] and pointers Long[B, M] for a
        phoneme-pointer codec) -> mel [B, 80, M * downsample]."""
        return self.decode_values(self.fsq.from_codes(codes).transpose(1, 2), speaker, phonemes, pointers)

    def decode_tokens(self, tokens: Tensor, speaker: Tensor, phonemes: Tensor, ph_len: Tensor) -> Tensor:
        """The GPT's tokens Long[B, M] -> mel: plain codes, or phoneme-pointer tokens split into codes and
        advances whose running sum is the pointer track."""
        if self.text is None:
            return self.decode(tokens, speaker)
        codes, advances = split_tokens(tokens, self.config.advances)
        return self.decode(codes, speaker, phonemes, pointer_track(advances, ph_len))

    def forward(
        self, mel: Tensor, speaker: Tensor, phonemes: Tensor | None = None, pointers: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Reconstruction for training: (mel [B, 80, T], codes)."""
        values, codes = self.quantize(mel)
        return self.decode_values(values, speaker, phonemes, pointers), codes
