"""Emotion: the label table, a reference-clip emotion encoder, a learned per-label table, and the fusion with
the speaker embedding into the acoustic model's condition.

Embeddings from the encoder and from the table live in one space (the training recipe ties them: the table
entry of a label is pulled towards the encoder embeddings of clips with that label, and the encoder's logits
are trained as a classifier). Both are unit-norm, like the GE2E speaker embedding, so α in
`cond = speaker ⊕ α·emotion` (IndexTTS's emo_alpha) is the emotion's strength relative to the voice; α = 0
gives an all-zero emotion part, which the acoustic model is trained to read as "the voice's own neutral style"
(the recipe drops the emotion to zero for a share of the training steps).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.constants import EMOTIONS, N_MELS, SPEAKER_EMBED_DIM
from rtvox.errors import InputError
from rtvox.models.layers import ChannelLayerNorm, config_from_dict, config_to_dict


def emotion_index(label: str) -> int:
    """Index of an emotion label in EMOTIONS (the order is part of every model's format)."""
    try:
        return EMOTIONS.index(label)
    except ValueError:
        raise InputError(f"unknown emotion {label!r}; use one of: {', '.join(EMOTIONS)}", param="emotion") from None


@dataclass(frozen=True)
class EmotionConfig:
    """Emotion encoder and table hyper-parameters; stored under "emotion" in the model's config.json."""

    n_mels: int = N_MELS
    channels: int = 256  # conv channels of the reference encoder
    layers: int = 4  # conv layers
    kernel: int = 5
    embed_dim: int = 128  # E: width of the emotion embedding (the acoustic cond_dim is 256 + E)
    n_emotions: int = len(EMOTIONS)
    dropout: float = 0.1

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "base": {},  # ~1.1M parameters
        "tiny": dict(channels=16, layers=2, embed_dim=16, dropout=0.0),
    }

    def __post_init__(self) -> None:
        if self.n_emotions != len(EMOTIONS):
            raise ValueError(f"n_emotions={self.n_emotions} but rtvox knows {len(EMOTIONS)} labels {EMOTIONS}")
        if self.kernel % 2 == 0 or self.layers < 1:
            raise ValueError("kernel must be odd and layers >= 1")

    @property
    def cond_dim(self) -> int:
        """Width of the fused condition this emotion part produces: speaker + emotion."""
        return SPEAKER_EMBED_DIM + self.embed_dim

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> EmotionConfig:
        if name not in cls.PRESETS:
            raise InputError(f"unknown emotion preset {name!r}; one of {', '.join(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmotionConfig:
        return config_from_dict(cls, data, "emotion")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)


class EmotionEncoder(nn.Module):
    """Reference clip log-mel -> (unit-norm emotion embedding, label logits). Owns a conv stack, an attentive
    statistics pooling over real frames and two linear heads. Export-clean; frames past `mask` are ignored."""

    def __init__(self, config: EmotionConfig) -> None:
        super().__init__()
        self.config = cfg = config
        sizes = [cfg.n_mels] + [cfg.channels] * cfg.layers
        self.convs = nn.ModuleList(
            [nn.Conv1d(a, b, cfg.kernel, padding=cfg.kernel // 2) for a, b in itertools.pairwise(sizes)]
        )
        self.norms = nn.ModuleList([ChannelLayerNorm(cfg.channels) for _ in range(cfg.layers)])
        self.attention = nn.Conv1d(cfg.channels, 1, 1)  # frame scores for the pooling
        self.project = nn.Linear(2 * cfg.channels, cfg.embed_dim)
        self.classify = nn.Linear(cfg.embed_dim, cfg.n_emotions)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, mel: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        # mel: [B, n_mels, T] log-mel (rtvox.audio.mel.MelSpectrogram), mask: Bool[B, T] or None (all real)
        # -> (embedding [B, E] unit norm, logits [B, n_emotions])
        if mask is None:
            mask = torch.ones(mel.shape[0], mel.shape[2], dtype=torch.bool, device=mel.device)
        m = mask[:, None, :].to(mel.dtype)  # [B, 1, T]
        h = mel * m
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = self.dropout(F.relu(norm(conv(h)))) * m  # [B, C, T]
        scores = self.attention(h).masked_fill(~mask[:, None, :], float("-inf"))  # [B, 1, T]
        weights = torch.softmax(scores, dim=-1)  # [B, 1, T], 0 at padding
        mean = (h * weights).sum(-1)  # [B, C]
        var = ((h - mean[:, :, None]) ** 2 * weights).sum(-1)
        stats = torch.cat([mean, torch.sqrt(var + 1e-6)], dim=-1)  # [B, 2C]
        embedding = F.normalize(self.project(stats), dim=-1)  # [B, E]
        return embedding, self.classify(embedding)


class EmotionTable(nn.Module):
    """One learned embedding per label in EMOTIONS, in the encoder's space: Long[B] -> [B, E] unit norm."""

    def __init__(self, config: EmotionConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.n_emotions, config.embed_dim)

    def forward(self, indices: Tensor) -> Tensor:
        # indices: Long[B] -> [B, E]
        return F.normalize(self.embeddings(indices), dim=-1)

    def embed(self, label: str) -> Tensor:
        """Convenience: the embedding [1, E] of one label (InputError for an unknown label)."""
        index = torch.tensor([emotion_index(label)], device=self.embeddings.weight.device)
        return self(index)


def fuse_condition(speaker: Tensor, emotion: Tensor, alpha: Tensor) -> Tensor:
    """cond = speaker ⊕ α·emotion. speaker [B, 256], emotion [B, E], alpha [B] -> [B, 256 + E].

    α = 0 zeroes the emotion half (the voice's neutral style); α scales it linearly up to EMOTION_ALPHA_MAX.
    """
    scaled = emotion * alpha.to(emotion.dtype)[:, None]
    return torch.cat([speaker.to(emotion.dtype), scaled], dim=-1)
