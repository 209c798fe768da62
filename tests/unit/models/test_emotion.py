"""Emotion labels, encoder, table and fusion."""

from __future__ import annotations

import pytest
import torch

from rtvox.constants import EMOTIONS, N_MELS, SPEAKER_EMBED_DIM
from rtvox.errors import InputError
from rtvox.models.emotion import EmotionConfig, EmotionEncoder, EmotionTable, emotion_index, fuse_condition


def test_emotion_index() -> None:
    assert [emotion_index(label) for label in EMOTIONS] == list(range(len(EMOTIONS)))
    with pytest.raises(InputError, match="neutral, happy") as err:
        emotion_index("bored")
    assert err.value.param == "emotion"


def test_encoder_shapes_and_mask() -> None:
    torch.manual_seed(0)
    config = EmotionConfig.preset("tiny")
    encoder = EmotionEncoder(config).eval()
    mel = torch.randn(2, N_MELS, 30)
    with torch.no_grad():
        embedding, logits = encoder(mel)
        assert embedding.shape == (2, config.embed_dim) and logits.shape == (2, len(EMOTIONS))
        torch.testing.assert_close(embedding.norm(dim=-1), torch.ones(2))
        # Frames past the mask do not matter: a 20-frame clip padded with garbage equals the clip alone.
        mask = torch.arange(30)[None] < torch.tensor([[20], [30]])
        padded, _ = encoder(mel, mask)
        alone, _ = encoder(mel[:1, :, :20])
    torch.testing.assert_close(padded[0], alone[0], rtol=0, atol=1e-5)


def test_table_and_fusion() -> None:
    torch.manual_seed(0)
    config = EmotionConfig.preset("tiny")
    table = EmotionTable(config)
    happy = table.embed("happy")
    assert happy.shape == (1, config.embed_dim)
    torch.testing.assert_close(table(torch.tensor([1]))[0], happy[0])
    speaker = torch.nn.functional.normalize(torch.rand(3, SPEAKER_EMBED_DIM), dim=-1)
    emotion = table(torch.tensor([0, 1, 2]))
    cond = fuse_condition(speaker, emotion, torch.tensor([0.0, 1.0, 2.0]))
    assert cond.shape == (3, config.cond_dim)
    assert torch.equal(cond[:, :SPEAKER_EMBED_DIM], speaker)
    assert (cond[0, SPEAKER_EMBED_DIM:] == 0).all()  # α = 0: the voice's neutral style
    torch.testing.assert_close(cond[2, SPEAKER_EMBED_DIM:], 2 * emotion[2])
