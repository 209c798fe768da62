"""The emotion prosody row of acoustic_encode: identity changes nothing, a prior row moves pitch, energy and
length by exactly what it says, exact targets stay exact; the config key and the host's rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor

from rtvox.models.acoustic import AcousticModel
from rtvox.models.bundle import ModelBundle
from rtvox.models.prosody import IDENTITY_ROW, EmotionProsody, ProsodyShift
from rtvox.models.variance import regulate_durations

from .conftest import make_request


def _pre_prior_encode(model: AcousticModel, request: tuple[Tensor, ...]) -> tuple[Tensor, Tensor]:
    """encode as it was before the prosody input (rtvox-small 3.0.0's graph), written out from its parts."""
    phonemes, mask, cond, speed, target, pitch_scale, energy_scale, _ = request
    x = model._encode_text(phonemes, mask, cond)
    v = model.variance
    frames = torch.expm1(v.duration(x, mask)).clamp_min(0.0)
    durations = regulate_durations(frames, mask, speed, target)
    x = x + v.pitch_embed(v.pitch(x, mask) * pitch_scale[:, None], mask)
    x = x + v.energy_embed(v.energy(x, mask) * energy_scale[:, None], mask)
    return x.masked_fill(~mask[..., None], 0.0), durations


def _capture(model: AcousticModel, request: tuple[Tensor, ...]) -> dict[str, Tensor]:
    """Run encode; return the raw predictions and the values fed to the pitch/energy embeddings."""
    seen: dict[str, Tensor] = {}
    v = model.variance
    hooks = [
        v.duration.register_forward_hook(lambda _m, _i, o: seen.__setitem__("log_frames", o)),
        v.pitch.register_forward_hook(lambda _m, _i, o: seen.__setitem__("pitch_pred", o)),
        v.energy.register_forward_hook(lambda _m, _i, o: seen.__setitem__("energy_pred", o)),
        v.pitch_embed.register_forward_pre_hook(lambda _m, args: seen.__setitem__("pitch", args[0])),
        v.energy_embed.register_forward_pre_hook(lambda _m, args: seen.__setitem__("energy", args[0])),
    ]
    try:
        with torch.no_grad():
            seen["hidden"], seen["durations"] = model.encode(*request)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _stats(values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    m = mask.float()
    mean = (values * m).sum(1) / m.sum(1)
    std = (((values - mean[:, None]) ** 2 * m).sum(1) / m.sum(1)).sqrt()
    return mean, std


def test_identity_row_is_the_pre_prior_graph_bit_for_bit(acoustic: AcousticModel) -> None:
    for request in (make_request([7, 12, 3]), make_request([9, 5], targets=[40, 0], seed=3, speed=1.3)):
        assert torch.equal(request[-1], torch.tensor([IDENTITY_ROW] * request[0].shape[0]))
        with torch.no_grad():
            hidden, durations = acoustic.encode(*request)
            want_hidden, want_durations = _pre_prior_encode(acoustic, request)
        assert torch.equal(durations, want_durations)
        assert torch.equal(hidden, want_hidden)


@pytest.mark.parametrize("row", [(0.5, 1.5, 0.3, 1.4), (-0.4, 0.6, -0.5, 0.75)])
def test_prior_row_moves_pitch_energy_and_length_by_its_amounts(
    acoustic: AcousticModel, row: tuple[float, float, float, float]
) -> None:
    lengths = [30, 18]
    base = _capture(acoustic, make_request(lengths, seed=5))
    moved = _capture(acoustic, make_request(lengths, seed=5, prosody=row))
    mask = make_request(lengths, seed=5)[1]
    shift, scale, loud, slow = row
    # Pitch: the same raw prediction; mean moved by `shift`, spread around the mean scaled by `scale`.
    assert torch.equal(moved["pitch_pred"], base["pitch_pred"])
    base_mean, base_std = _stats(base["pitch"], mask)
    mean, std = _stats(moved["pitch"], mask)
    torch.testing.assert_close(mean, base_mean + shift, rtol=0, atol=1e-5)
    torch.testing.assert_close(std, base_std * scale, rtol=1e-4, atol=1e-6)
    # Energy: the prediction (which now sees the moved pitch) plus exactly `loud` (padding is masked downstream).
    torch.testing.assert_close(moved["energy"][mask], moved["energy_pred"][mask] + loud, rtol=0, atol=1e-6)
    # Length: each phoneme's frames scaled by `slow` before rounding.
    frames = torch.expm1(base["log_frames"]).clamp_min(0.0)
    want = torch.round(frames * slow).clamp_min(1.0).long() * mask
    assert torch.equal(moved["durations"], want)
    ratio = moved["durations"].sum(1).float() / base["durations"].sum(1).float()
    assert (ratio - slow).abs().max() < 0.1
    assert ((ratio > 1) if slow > 1 else (ratio < 1)).all()


def test_tilt_mel_changes_the_slope_not_the_mean() -> None:
    import numpy as np

    from rtvox.models.prosody import tilt_mel

    mel = torch.randn(80, 30, dtype=torch.float64)
    out = tilt_mel(mel, 1.7)
    bands = np.arange(80) / 80
    slope = lambda m: np.polyfit(bands, m.numpy(), 1)[0]  # noqa: E731
    assert slope(out) - slope(mel) == pytest.approx(np.full(30, 1.7))
    torch.testing.assert_close(out.mean(0), mel.mean(0))
    assert tilt_mel(mel, 0.0) is mel


def test_pitch_scale_applies_after_the_prior(acoustic: AcousticModel) -> None:
    request = make_request([15], seed=2, prosody=(0.5, 1.2, 0.0, 1.0))
    flat = (*request[:5], torch.zeros(1), *request[6:])
    seen = _capture(acoustic, flat)
    assert torch.count_nonzero(seen["pitch"]) == 0  # pitch_scale 0 = monotone at the voice's average, as before


def test_exact_target_stays_exact_with_a_duration_prior(acoustic: AcousticModel) -> None:
    targets = [50, 123, 7]
    plain = make_request([10, 25, 4], targets=targets, seed=9)
    for slow in (0.7, 1.0, 1.45):
        request = make_request([10, 25, 4], targets=targets, seed=9, prosody=(0.2, 1.1, 0.1, slow))
        with torch.no_grad():
            _, durations = acoustic.encode(*request)
            _, plain_durations = acoustic.encode(*plain)
        assert durations.sum(1).tolist() == targets
        # a uniform ratio does not change the proportions, so not the fitted durations either
        assert torch.equal(durations, plain_durations)


def test_config_without_the_key_loads_with_the_identity_prior(bundle_copy: Callable[[], Path]) -> None:
    path = bundle_copy()
    assert "emotion_prosody" not in json.loads((path / "config.json").read_text())
    prior = ModelBundle.load(path).config.emotion_prosody
    assert prior.shifts == {}
    assert prior.row("happy", 1.0) == IDENTITY_ROW and prior.row(None, 1.0) == IDENTITY_ROW


def test_config_round_trip_and_rows(bundle_copy: Callable[[], Path]) -> None:
    path = bundle_copy()
    config = json.loads((path / "config.json").read_text())
    config["emotion_prosody"] = {
        "happy": {
            "pitch_shift": 0.4,
            "pitch_range": 1.21,
            "energy_shift": 0.2,
            "duration": 0.81,
            "tilt": -0.5,
        },
        "neutral": {"pitch_shift": 9.0},  # ignored: neutral is the reference
        "source": {"data": "packed"},
    }
    (path / "config.json").write_text(json.dumps(config))
    bundle = ModelBundle.load(path)
    prior = bundle.config.emotion_prosody
    assert prior.row("happy", 1.0) == pytest.approx((0.4, 1.21, 0.2, 0.81))
    assert prior.row("happy", 0.5) == pytest.approx((0.2, 1.1, 0.1, 0.9))
    assert prior.tilt("happy", 0.5) == pytest.approx(-0.25) and prior.tilt("neutral", 1.0) == 0.0
    assert prior.row("happy", 0.0) == pytest.approx(IDENTITY_ROW)
    assert prior.row("neutral", 1.0) == IDENTITY_ROW and prior.row("sad", 1.0) == IDENTITY_ROW
    assert bundle.config.to_dict()["emotion_prosody"]["source"] == {"data": "packed"}


def test_bad_prior_entries_are_refused() -> None:
    from rtvox.errors import ModelError

    with pytest.raises(ModelError, match="emotion_prosody"):
        EmotionProsody.from_dict({"joyful": {"pitch_shift": 1.0}})
    with pytest.raises(ModelError, match="emotion_prosody"):
        EmotionProsody.from_dict({"happy": {"duration": -1.0}})
    with pytest.raises(ValueError):
        ProsodyShift(pitch_range=0.0)


def test_pitch_bounds_clamp_what_the_embedding_receives(acoustic: AcousticModel) -> None:
    import copy

    bounded = copy.deepcopy(acoustic)
    bounded.variance.pitch_bounds = (-0.4, 0.3)
    lengths = [30, 18]
    mask = make_request(lengths, seed=5)[1]
    for row in (IDENTITY_ROW, (0.5, 2.5, 0.0, 1.0), (100.0, 1.0, 0.0, 1.0), (-100.0, 1.0, 0.0, 1.0)):
        free = _capture(acoustic, make_request(lengths, seed=5, prosody=row))
        got = _capture(bounded, make_request(lengths, seed=5, prosody=row))
        torch.testing.assert_close(got["pitch"][mask], free["pitch"][mask].clamp(-0.4, 0.3), rtol=0, atol=0)
        assert torch.equal(got["durations"], free["durations"])  # durations come before the pitch
    far_up = _capture(bounded, make_request(lengths, seed=5, prosody=(100.0, 1.0, 0.0, 1.0)))
    assert bool((far_up["pitch"][mask] == 0.3).all())
    # and a bound wider than anything predicted changes nothing, bit for bit
    wide = copy.deepcopy(acoustic)
    wide.variance.pitch_bounds = (-1e6, 1e6)
    with torch.no_grad():
        a = acoustic.encode(*make_request(lengths, seed=5))
        b = wide.encode(*make_request(lengths, seed=5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("bounds", [[0.5, 3.0], [-2.0, -0.1], [-2.0, float("inf")], [1.0]])
def test_invalid_pitch_bounds_name_the_key(bounds: list[float]) -> None:
    from rtvox.errors import ModelError
    from rtvox.models.acoustic import AcousticConfig

    with pytest.raises(ModelError, match="pitch_bounds"):
        AcousticConfig.from_dict({"pitch_bounds": bounds})
    assert AcousticConfig.from_dict({"pitch_bounds": [-2.5, 3.1]}).pitch_bounds == (-2.5, 3.1)
