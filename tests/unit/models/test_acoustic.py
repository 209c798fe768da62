"""AcousticModel: shapes, encode/decode parity, padding invariance, training pass, configs."""

from __future__ import annotations

import math

import pytest
import torch

from rtvox.constants import N_MELS
from rtvox.errors import InputError, ModelError
from rtvox.models.acoustic import MEL_PAD_VALUE, AcousticConfig, AcousticModel, acoustic_losses
from rtvox.models.layers import count_parameters

from .conftest import VOCAB_SIZE, make_request, row


def test_infer_shapes_and_lengths(acoustic: AcousticModel) -> None:
    request = make_request([7, 4, 1])
    with torch.no_grad():
        mel, mel_lengths, durations = acoustic.infer(*request)
    assert durations.shape == (3, 7) and durations.dtype == torch.long
    assert torch.equal(mel_lengths, durations.sum(1))
    assert mel.shape == (3, N_MELS, int(mel_lengths.max()))
    mask = request[1]
    assert (durations[mask] >= 1).all() and (durations[~mask] == 0).all()
    assert (mel[1, :, mel_lengths[1] :] == MEL_PAD_VALUE).all()
    assert torch.isfinite(mel).all()


def test_target_frames_are_hit_exactly(acoustic: AcousticModel) -> None:
    request = make_request([9, 6, 3], targets=[120, 0, 2], speed=1.7)
    with torch.no_grad():
        _, mel_lengths, durations = acoustic.infer(*request)
    assert mel_lengths[0] == 120 and mel_lengths[2] == 2
    assert (durations[1, :6] >= 1).all()


def test_speed_changes_total_length(acoustic: AcousticModel) -> None:
    with torch.no_grad():
        slow = acoustic.infer(*make_request([12], speed=0.5))[1]
        fast = acoustic.infer(*make_request([12], speed=2.0))[1]
    assert slow > fast


def test_infer_equals_encode_then_decode(acoustic: AcousticModel) -> None:
    request = make_request([8, 5], targets=[0, 40])
    with torch.no_grad():
        mel, _, durations = acoustic.infer(*request)
        hidden, durations2 = acoustic.encode(*request)
        mel2 = acoustic.decode(hidden, durations2)
    assert hidden.shape == (2, 8, acoustic.config.dim)
    assert torch.equal(durations, durations2)
    torch.testing.assert_close(mel, mel2, rtol=0, atol=0)


def test_decode_with_a_frame_bucket_pads_with_silence(acoustic: AcousticModel) -> None:
    request = make_request([6, 3])
    with torch.no_grad():
        hidden, durations = acoustic.encode(*request)
        mel = acoustic.decode(hidden, durations)
        bucket = acoustic.decode(hidden, durations, max_frames=mel.shape[2] + 13)
        frame_mask = torch.arange(mel.shape[2] + 13)[None] < durations.sum(1, keepdim=True)
        masked = acoustic.decode_masked(hidden, durations, frame_mask)
    assert bucket.shape[2] == mel.shape[2] + 13
    torch.testing.assert_close(bucket[:, :, : mel.shape[2]], mel, rtol=0, atol=1e-5)
    assert (bucket[:, :, mel.shape[2] :] == MEL_PAD_VALUE).all()
    torch.testing.assert_close(masked, bucket, rtol=0, atol=0)


@pytest.mark.parametrize("targets", [None, [60, 0, 25]])
def test_padding_does_not_change_a_sequence(acoustic: AcousticModel, targets: list[int] | None) -> None:
    lengths = [9, 4, 6]
    batch = make_request(lengths, seed=3, targets=targets)
    with torch.no_grad():
        mel_b, _, dur_b = acoustic.infer(*batch)
        hid_b, _ = acoustic.encode(*batch)
        for i, n in enumerate(lengths):
            single = row(batch, i, n)
            mel_s, len_s, dur_s = acoustic.infer(*single)
            hid_s, _ = acoustic.encode(*single)
            assert torch.equal(dur_s[0], dur_b[i, :n])
            torch.testing.assert_close(hid_s[0], hid_b[i, :n], rtol=0, atol=1e-5)
            torch.testing.assert_close(mel_s[0], mel_b[i, :, : len_s[0]], rtol=0, atol=1e-5)


def test_pitch_and_energy_scales_change_the_output(acoustic: AcousticModel) -> None:
    phonemes, mask, cond, speed, target, pitch, energy, prosody = make_request([6])
    with torch.no_grad():
        base, _ = acoustic.encode(phonemes, mask, cond, speed, target, pitch, energy, prosody)
        flat, _ = acoustic.encode(phonemes, mask, cond, speed, target, pitch * 0, energy, prosody)
        loud, _ = acoustic.encode(phonemes, mask, cond, speed, target, pitch, energy * 2, prosody)
    assert not torch.allclose(base, flat) and not torch.allclose(base, loud)


def test_forward_train_and_losses_backpropagate(acoustic: AcousticModel) -> None:
    acoustic.train()
    phonemes, mask, cond, *_ = make_request([5, 3])
    durations = torch.tensor([[2, 3, 1, 4, 2], [3, 1, 2, 0, 0]])
    pitch, energy = torch.randn(2, 5) * mask, torch.rand(2, 5) * mask
    out = acoustic.forward_train(phonemes, mask, cond, durations, pitch, energy)
    assert out.mel.shape == out.mel_post.shape == (2, N_MELS, 12)
    assert out.frame_mask.sum(1).tolist() == [12, 6]
    target_mel = torch.randn(2, N_MELS, 12)
    losses = acoustic_losses(out, target_mel, durations, pitch, energy)
    assert set(losses) == {"mel", "mel_post", "duration", "pitch", "energy", "total"}
    losses["total"].backward()
    grad = acoustic.embed.weight.grad
    assert grad is not None and torch.isfinite(grad).all()


def test_pad_value_is_the_log_mel_floor() -> None:
    from rtvox.audio.mel import LOG_MEL_FLOOR

    assert math.log(LOG_MEL_FLOOR) == MEL_PAD_VALUE


def test_config_round_trip_and_presets() -> None:
    config = AcousticConfig.preset("tiny", vocab_size=VOCAB_SIZE)
    assert AcousticConfig.from_dict(config.to_dict()) == config
    with pytest.raises(InputError, match="tiny"):
        AcousticConfig.preset("huge")
    with pytest.raises(ModelError, match="unknown acoustic config keys"):
        AcousticConfig.from_dict({**config.to_dict(), "colour": 1})
    with torch.device("meta"):  # count without allocating
        tiny = count_parameters(AcousticModel(config))
        base = count_parameters(AcousticModel(AcousticConfig.preset("base", vocab_size=200)))
    assert tiny < 1_000_000
    assert 15_000_000 <= base <= 25_000_000


def test_frame_positions_place_each_frame_inside_its_phoneme() -> None:
    from rtvox.models.variance import frame_positions

    got = frame_positions(torch.tensor([[2, 3, 0]]), 6)[0]
    progress = [0.0, 0.5, 0.0, 1 / 3, 2 / 3]
    torch.testing.assert_close(got[:5, 0], torch.tensor(progress))
    torch.testing.assert_close(got[:5, 1], torch.tensor(progress) ** 2)
    torch.testing.assert_close(got[:5, 2], torch.sin(torch.tensor(progress) * math.pi))
    torch.testing.assert_close(got[:5, 4], torch.tensor([2, 2, 3, 3, 3]) / 32.0)
    assert not got[5].any()  # past the row's end


def test_frame_position_layer_starts_as_a_no_op_and_then_shapes_frames(acoustic: AcousticModel) -> None:
    """A frame-position model given another model's weights (its new layer at zero) decodes exactly as that
    model, in every decode path; once the layer learns something, the mel changes."""
    cfg = AcousticConfig(**{**acoustic.config.to_dict(), "frame_position": True})
    positioned = AcousticModel(cfg).eval()
    missing, unexpected = positioned.load_state_dict(acoustic.state_dict(), strict=False)
    assert set(missing) == {"frame_pos.weight", "frame_pos.bias"} and not unexpected
    request = make_request([7, 4, 1])
    with torch.no_grad():
        hidden, durations = acoustic.encode(*request)
        frame_mask = torch.arange(64)[None, :] < durations.sum(1)[:, None]
        torch.testing.assert_close(acoustic.decode(hidden, durations), positioned.decode(hidden, durations))
        torch.testing.assert_close(
            acoustic.decode_masked(hidden, durations, frame_mask),
            positioned.decode_masked(hidden, durations, frame_mask),
        )
        assert positioned.frame_pos is not None
        torch.nn.init.normal_(positioned.frame_pos.weight)
        assert not torch.allclose(acoustic.decode(hidden, durations), positioned.decode(hidden, durations))
    assert AcousticConfig.from_dict(cfg.to_dict()).frame_position
