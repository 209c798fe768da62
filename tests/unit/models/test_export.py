"""Export-cleanliness: torch.export with dynamic batch / length dims (and ONNX when onnx is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.export import Dim, export

from rtvox.constants import N_MELS
from rtvox.models.acoustic import AcousticDecodeStep, AcousticEncodeStep, AcousticModel
from rtvox.models.emotion import EmotionConfig, EmotionEncoder
from rtvox.models.vocoder import HiFiGAN, VocoderConfig

from .conftest import make_request

BATCH = Dim("batch", min=1, max=64)
PHONEMES = Dim("phonemes", min=2, max=1024)
FRAMES = Dim("frames", min=2, max=8192)


class _DataDependentDecode(torch.nn.Module):
    def __init__(self, model: AcousticModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, hidden: torch.Tensor, durations: torch.Tensor) -> torch.Tensor:
        return self.model.decode(hidden, durations)


def test_export_encode_and_decode_with_dynamic_shapes(acoustic: AcousticModel) -> None:
    example = make_request([9, 5], targets=[0, 30])
    b, bn = {0: BATCH}, {0: BATCH, 1: PHONEMES}
    encoder = export(AcousticEncodeStep(acoustic), example, dynamic_shapes=(bn, bn, b, b, b, b, b, b), strict=False)
    hidden, durations = acoustic.encode(*example)
    frame_mask = torch.arange(64)[None] < durations.sum(1, keepdim=True)
    decoder = export(
        AcousticDecodeStep(acoustic),
        (hidden, durations, frame_mask),
        dynamic_shapes=(bn, bn, {0: BATCH, 1: FRAMES}),
        strict=False,
    )
    data_dependent = export(_DataDependentDecode(acoustic), (hidden, durations), dynamic_shapes=(bn, bn), strict=False)
    # Other batch size and lengths than the example: the graphs were not specialized to it.
    other = make_request([17, 3, 11], seed=4, targets=[0, 0, 80])
    with torch.no_grad():
        hidden_e, durations_e = encoder.module()(*other)
        hidden_ref, durations_ref = acoustic.encode(*other)
        assert torch.equal(durations_e, durations_ref)
        torch.testing.assert_close(hidden_e, hidden_ref, rtol=0, atol=1e-5)
        reference = acoustic.decode(hidden_ref, durations_ref)
        torch.testing.assert_close(data_dependent.module()(hidden_ref, durations_ref), reference, rtol=0, atol=1e-5)
        bucket = reference.shape[2] + 7
        mask = torch.arange(bucket)[None] < durations_ref.sum(1, keepdim=True)
        mel = decoder.module()(hidden_ref, durations_ref, mask)
    assert mel.shape[2] == bucket
    torch.testing.assert_close(mel[:, :, : reference.shape[2]], reference, rtol=0, atol=1e-5)


def test_export_vocoder_with_dynamic_frames() -> None:
    vocoder = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    example = (torch.randn(2, N_MELS, 12),)
    program = export(vocoder, example, dynamic_shapes=({0: BATCH, 2: FRAMES},), strict=False)
    mel = torch.randn(3, N_MELS, 29)
    with torch.no_grad():
        torch.testing.assert_close(program.module()(mel), vocoder(mel), rtol=0, atol=1e-6)


def test_export_emotion_encoder_with_dynamic_frames() -> None:
    encoder = EmotionEncoder(EmotionConfig.preset("tiny")).eval()
    mel = torch.randn(2, N_MELS, 40)
    mask = torch.arange(40)[None] < torch.tensor([[40], [25]])
    program = export(encoder, (mel, mask), dynamic_shapes=({0: BATCH, 2: FRAMES}, {0: BATCH, 1: FRAMES}), strict=False)
    mel2, mask2 = torch.randn(3, N_MELS, 57), torch.ones(3, 57, dtype=torch.bool)
    with torch.no_grad():
        for got, want in zip(program.module()(mel2, mask2), encoder(mel2, mask2), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_onnx_export_of_the_vocoder(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    vocoder = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    torch.onnx.export(
        vocoder,
        (torch.randn(2, N_MELS, 12),),
        str(tmp_path / "vocoder.onnx"),
        input_names=["mel"],
        output_names=["wav"],
        dynamic_shapes=({0: BATCH, 2: FRAMES},),
        dynamo=True,
    )
    assert (tmp_path / "vocoder.onnx").stat().st_size > 0


def test_export_decode_with_the_frame_position_layer(acoustic: AcousticModel) -> None:
    """The frame-position term (a trained layer made non-zero here) stays export-clean over dynamic frames."""
    from rtvox.models.acoustic import AcousticConfig

    model = AcousticModel(AcousticConfig(**{**acoustic.config.to_dict(), "frame_position": True})).eval()
    model.load_state_dict(acoustic.state_dict(), strict=False)
    assert model.frame_pos is not None
    torch.nn.init.normal_(model.frame_pos.weight, std=0.1)
    hidden, durations = model.encode(*make_request([9, 5], targets=[0, 30]))
    bn = {0: BATCH, 1: PHONEMES}
    frame_mask = torch.arange(64)[None] < durations.sum(1, keepdim=True)
    decoder = export(
        AcousticDecodeStep(model),
        (hidden, durations, frame_mask),
        dynamic_shapes=(bn, bn, {0: BATCH, 1: FRAMES}),
        strict=False,
    )
    with torch.no_grad():
        hidden, durations = model.encode(*make_request([17, 3, 11], seed=4, targets=[0, 0, 80]))
        reference = model.decode(hidden, durations)
        mask = torch.arange(reference.shape[2] + 5)[None] < durations.sum(1, keepdim=True)
        mel = decoder.module()(hidden, durations, mask)
    torch.testing.assert_close(mel[:, :, : reference.shape[2]], reference, rtol=0, atol=1e-5)
