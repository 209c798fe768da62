"""HiFi-GAN generator: lengths, range, weight norm, presets; the chunk-end rule of both vocoder families."""

from __future__ import annotations

import pytest
import torch

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.errors import InputError, ModelError
from rtvox.models.layers import count_parameters
from rtvox.models.vocoder import (
    HiFiGAN,
    VocoderConfig,
    build_vocoder,
    end_silence_frames,
    vocoder_preset,
    with_end_silence,
)


def test_output_length_and_range() -> None:
    torch.manual_seed(0)
    vocoder = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    for frames in (1, 7, 20):
        with torch.no_grad():
            wav = vocoder(torch.randn(2, N_MELS, frames) * 3)
        assert wav.shape == (2, frames * HOP_LENGTH)
        assert wav.abs().max() <= 1.0


def test_frames_are_causal_enough_for_batching() -> None:
    # Two clips padded to one length: each clip's samples match running it alone (up to the receptive field
    # at the very end, which the runtime cuts with mel_lengths anyway).
    torch.manual_seed(1)
    vocoder = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    mel = torch.randn(1, N_MELS, 10)
    with torch.no_grad():
        alone = vocoder(mel)
        batched = vocoder(torch.cat([mel, torch.randn(1, N_MELS, 10)]))
    torch.testing.assert_close(batched[:1], alone, rtol=0, atol=1e-6)


@pytest.mark.parametrize("preset", ["tiny", "vocos-tiny"])
def test_end_silence_is_all_a_chunk_end_sees(preset: str) -> None:
    """The chunk-end rule: past `end_silence_frames` of silence nothing reaches the chunk's samples, so more
    silence (a bucket's) or none beyond it (the convolutions' zero padding) gives the same audio; with no silence
    the end differs."""
    torch.manual_seed(3)
    config = vocoder_preset(preset)
    vocoder = build_vocoder(config).eval()
    for module in vocoder.modules():  # louder than the tiny init, so a difference at the end shows
        if isinstance(module, torch.nn.Conv1d | torch.nn.ConvTranspose1d):
            torch.nn.init.normal_(module.weight, 0.0, 1.0 / (module.weight.shape[1] * module.weight.shape[2]) ** 0.5)
    mel = torch.randn(1, N_MELS, 40) * 2
    n, end = 40 * HOP_LENGTH, end_silence_frames(config)
    with torch.no_grad():
        ruled = vocoder(with_end_silence(mel, end))[:, :n]
        bucket = vocoder(with_end_silence(mel, end + 57))[:, :n]
        bare = vocoder(mel)
    assert with_end_silence(mel, end).shape == (1, N_MELS, 40 + end)
    torch.testing.assert_close(ruled, bucket, rtol=0, atol=1e-6)
    assert float((bare - ruled).abs().max()) > 1e-3


def test_weight_norm_removal_keeps_the_function() -> None:
    torch.manual_seed(2)
    vocoder = HiFiGAN(VocoderConfig.preset("tiny"), weight_norm=True).eval()
    assert vocoder.has_weight_norm
    mel = torch.randn(1, N_MELS, 6)
    with torch.no_grad():
        before = vocoder(mel)
        state = vocoder.inference_state_dict()
        assert not any("parametrizations" in k for k in state)
        plain = HiFiGAN(VocoderConfig.preset("tiny"))
        plain.load_state_dict(state)
        torch.testing.assert_close(plain.eval()(mel), before, rtol=0, atol=1e-6)
        vocoder.remove_weight_norm()
        assert not vocoder.has_weight_norm
        torch.testing.assert_close(vocoder(mel), before, rtol=0, atol=1e-6)


def test_presets_and_config_validation() -> None:
    with torch.device("meta"):
        counts = {name: count_parameters(HiFiGAN(VocoderConfig.preset(name))) for name in ("v1", "light", "tiny")}
    assert 13_000_000 < counts["v1"] < 15_000_000
    assert 500_000 < counts["light"] < 1_500_000
    assert counts["tiny"] < 100_000
    config = VocoderConfig.preset("v1")
    assert VocoderConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="HOP_LENGTH"):
        VocoderConfig(upsample_rates=(8, 8, 2), upsample_kernels=(16, 16, 4))
    with pytest.raises(ModelError):
        VocoderConfig.from_dict({**config.to_dict(), "upsample_rates": [5, 5, 5, 2]})
    with pytest.raises(InputError):
        VocoderConfig.preset("v9")
