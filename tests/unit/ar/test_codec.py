"""The mel tokenizer (FSQ) and its token-to-mel decoder."""

from __future__ import annotations

import pytest
import torch

from rtvox.models.codec import FSQ, CodecConfig, MelCodec


def test_fsq_codes_cover_the_codebook_and_round_trip() -> None:
    fsq = FSQ((8, 5, 5, 5))
    z = torch.rand(200_000, 4, generator=torch.Generator().manual_seed(0)) * 5 - 2.5
    values, codes = fsq(z)
    assert int(codes.min()) >= 0 and int(codes.max()) < 1000
    assert codes.unique().numel() == 1000  # every code is reachable
    torch.testing.assert_close(fsq.from_codes(codes), values)  # codes carry everything the decoder sees
    assert torch.equal(fsq.to_codes(fsq.from_codes(codes) * torch.tensor([4.0, 2, 2, 2])), codes)


def test_fsq_passes_gradients_straight_through() -> None:
    z = torch.randn(8, 4, requires_grad=True)
    values, _ = FSQ((8, 5, 5, 5))(z)
    values.sum().backward()
    assert z.grad is not None and bool((z.grad.abs() > 0).all())


def test_codec_shapes_and_learning_a_tiny_set() -> None:
    torch.manual_seed(0)
    config = CodecConfig.preset("tiny")
    codec = MelCodec(config)
    mel = torch.randn(2, 80, 32).cumsum(2) * 0.1  # smooth, mel-like trajectories
    speaker = torch.randn(2, 256)
    out, codes = codec(mel, speaker)
    assert out.shape == mel.shape and codes.shape == (2, 8) and codes.max() < config.n_codes
    torch.testing.assert_close(codec.decode(codes, speaker), out, atol=1e-5, rtol=1e-5)
    opt = torch.optim.Adam(codec.parameters(), lr=3e-3)
    first = float((out - mel).abs().mean().detach())
    for _ in range(150):
        out, _ = codec(mel, speaker)
        loss = (out - mel).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.5 * first, (first, float(loss))


def test_codec_config_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="power of two"):
        CodecConfig(downsample=3)
    with pytest.raises(ValueError, match="≥ 2"):
        CodecConfig(levels=(1, 5))
