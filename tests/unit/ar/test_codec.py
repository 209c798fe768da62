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


def test_pointer_track_from_durations_golden() -> None:
    from rtvox.models.codec import pointers_from_durations

    # frames: ph0 0-2, ph1 3-4, ph2 5-10, ph3 11, ph4 12-15; each token's last frame is 3, 7, 11, 15
    assert pointers_from_durations([3, 2, 6, 1, 4], 4, 4, 4) == [1, 2, 3, 4]
    # six one-frame phonemes then a long one: true pointers 3, 6, 6, 6; one advance per token at most lags, then
    # catches up
    assert pointers_from_durations([1, 1, 1, 1, 1, 1, 10], 4, 4, 2) == [1, 2, 3, 4]
    assert pointers_from_durations([1, 1, 1, 1, 1, 1, 10], 4, 4, 4) == [3, 6, 6, 6]


def test_pointer_codec_reads_the_phonemes_over_each_token_span() -> None:
    from rtvox.models.codec import TextSpans, pointer_track, split_tokens

    spans = TextSpans(vocab=10, dim=4, blocks=1).eval()
    phonemes = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        enc = spans.encoder(spans.embed(phonemes).transpose(1, 2))[0]  # [D, N]
        got = spans(phonemes, torch.tensor([[0, 0, 2, 3]]))[0]  # spans [0,0], [0,0], [0,2], [2,3]
    want = torch.stack([enc[:, 0], enc[:, 0], enc[:, 0:3].mean(1), enc[:, 2:4].mean(1)], dim=1)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert pointer_track(torch.tensor([[1, 0, 3, 2]]), torch.tensor([5])).tolist() == [[1, 1, 4, 4]]
    codes, steps = split_tokens(torch.tensor([[13, 4, 7]]), 4)
    assert codes.tolist() == [[3, 1, 1]] and steps.tolist() == [[1, 0, 3]]

    config = CodecConfig.preset("pointer-tiny")
    codec = MelCodec(config).eval()
    mel, speaker = torch.randn(1, 80, 16), torch.randn(1, 256)
    ids = torch.tensor([[5, 9, 12, 7]])
    tokens = torch.tensor([[2 * 4 + 1, 5 * 4 + 0, 1 * 4 + 2, 0 * 4 + 1]])
    with torch.no_grad():
        via_tokens = codec.decode_tokens(tokens, speaker, ids, torch.tensor([4]))
        direct = codec.decode(torch.tensor([[2, 5, 1, 0]]), speaker, ids, torch.tensor([[1, 1, 3, 3]]))
        other_text = codec.decode(torch.tensor([[2, 5, 1, 0]]), speaker, ids.flip(1), torch.tensor([[1, 1, 3, 3]]))
    torch.testing.assert_close(via_tokens, direct)
    assert (other_text - direct).abs().max() > 1e-3  # the phonemes reach the mel
    assert config.n_tokens == config.n_codes * 4
    with pytest.raises(ValueError, match="phonemes"):
        codec(mel, speaker)
    with pytest.raises(ValueError, match="advances"):
        CodecConfig(text_vocab=10, advances=1)
