"""The iSTFT vocoder: exact inverse STFT, exact output length, a bounded receptive field, bundle round trip."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from rtvox.constants import HOP_LENGTH, N_FFT
from rtvox.models.bundle import ModelBundle, ModelConfig
from rtvox.models.vocos import Vocos, VocosConfig


def test_istft_head_inverts_the_projects_stft_framing() -> None:
    torch.manual_seed(0)
    frames = 40
    wav = torch.randn(1, frames * HOP_LENGTH) * 0.1
    pad = (N_FFT - HOP_LENGTH) // 2
    padded = F.pad(wav[:, None], (pad, pad), mode="reflect")[:, 0]
    window = torch.hann_window(N_FFT)
    spec = torch.stft(padded, N_FFT, HOP_LENGTH, N_FFT, window, center=False, return_complex=True)
    assert spec.shape[-1] == frames
    head = Vocos(VocosConfig.preset("tiny")).head
    both = torch.cat([spec.real, spec.imag], 1)
    out = F.conv_transpose1d(both, head.basis, stride=HOP_LENGTH)
    env = F.conv_transpose1d(torch.ones(1, 1, frames), head.window_sq, stride=HOP_LENGTH)
    recon = out[:, 0, pad : pad + frames * HOP_LENGTH] / env[:, 0, pad : pad + frames * HOP_LENGTH]
    assert torch.allclose(recon, wav, atol=1e-5)


def test_output_length_range_and_receptive_field() -> None:
    torch.manual_seed(0)
    model = Vocos(VocosConfig.preset("tiny")).eval()
    mel = torch.randn(1, 80, 60)
    with torch.no_grad():
        wav = model(mel)
        assert wav.shape == (1, 60 * HOP_LENGTH) and wav.abs().max() <= 1.0
        changed = mel.clone()
        changed[:, :, 59] += 3.0  # perturb the last frame only
        wav2 = model(changed)
    reach = model.receptive_field_frames
    far = (59 - reach) * HOP_LENGTH
    assert torch.equal(wav[:, :far], wav2[:, :far])
    assert not torch.equal(wav[:, -HOP_LENGTH:], wav2[:, -HOP_LENGTH:])


def test_small_preset_bundle_round_trip(tmp_path: Path) -> None:
    config = ModelConfig.preset("small", vocab_size=64)
    assert config.vocoder.family == "vocos"
    data = config.to_dict()
    assert ModelConfig.from_dict(data) == config
    from rtvox.models.bundle import make_random_bundle

    bundle = make_random_bundle(tmp_path / "m", preset="tiny")
    assert isinstance(ModelBundle.load(tmp_path / "m"), ModelBundle)
    assert bundle.config.vocoder.family == "hifigan"


def test_loaded_vocos_bundle_computes_its_fixed_buffers(tmp_path: Path) -> None:
    """The DFT basis and window are not saved; loading (modules built on the meta device) must recompute them."""
    from rtvox.models.bundle import make_random_bundle

    bundle = make_random_bundle(tmp_path / "m", preset="tiny")
    torch.manual_seed(1)
    vocos = Vocos(VocosConfig.preset("tiny")).eval()
    bundle.vocoder = vocos
    bundle.config = ModelConfig.from_dict({**bundle.config.to_dict(), "vocoder": vocos.config.to_dict()})
    bundle.save(tmp_path / "v")
    loaded = ModelBundle.load(tmp_path / "v")
    assert not any(b.is_meta for b in loaded.vocoder.buffers())
    assert torch.equal(loaded.vocoder.head.basis, vocos.head.basis)
    for p in vocos.parameters():
        p.data = p.data.half().float()  # the weights ship in fp16
    mel = torch.randn(1, 80, 30)
    with torch.no_grad():
        ref, out = vocos(mel), loaded.vocoder(mel)
    assert torch.allclose(out, ref, atol=1e-4)


def test_eager_fft_head_equals_the_exported_basis_head() -> None:
    """Eager runs the inverse DFT by FFT + overlap-add; exporters and compilers get the basis convolution.
    Both must give the same waveform (else engines built from the graph would drift from eager)."""
    from unittest import mock

    torch.manual_seed(2)
    head = Vocos(VocosConfig.preset("tiny")).head.eval()
    x = torch.randn(2, 37, head.out.in_features) * 3.0  # large enough that magnitudes reach the clamp
    with torch.no_grad():
        fft = head(x)
        with mock.patch("torch.compiler.is_compiling", return_value=True):
            basis = head(x)
    assert fft.shape == basis.shape == (2, 37 * HOP_LENGTH)
    torch.testing.assert_close(fft, basis, rtol=0, atol=1e-5 * float(basis.abs().max()))


def test_overlap_add_matches_fold_for_any_hop() -> None:
    from rtvox.models.vocos import _overlap_add

    torch.manual_seed(3)
    for n, hop in ((1024, 256), (12, 5), (8, 8)):
        segments = torch.randn(2, 9, n)
        ref = F.fold(segments.transpose(1, 2), (1, 8 * hop + n), (1, n), stride=(1, hop))[:, 0, 0]
        torch.testing.assert_close(_overlap_add(segments, hop), ref)
