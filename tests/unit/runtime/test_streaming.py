"""StreamingVocoder: the concatenated stream equals one-shot HiFi-GAN output when context covers the receptive field."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.models.vocoder import HiFiGAN, VocoderConfig
from rtvox.runtime.streaming import StreamingVocoder, receptive_field_frames

TOL = 1e-4


def _vocoder(preset: str, seed: int = 0) -> HiFiGAN:
    # The reference init (std 0.01) gives output ~1e-4, which would make TOL meaningless; scale weights so the
    # output is O(0.1-1) and errors are visible.
    torch.manual_seed(seed)
    model = HiFiGAN(VocoderConfig.preset(preset)).eval()
    for m in model.modules():
        if isinstance(m, nn.Conv1d | nn.ConvTranspose1d):
            fan_in = m.weight.shape[1 if isinstance(m, nn.Conv1d) else 0] * m.weight.shape[2]
            nn.init.normal_(m.weight, 0.0, 1.0 / fan_in**0.5)
    return model


def _mel(frames: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(1, N_MELS, frames, generator=torch.Generator().manual_seed(seed))


def _one_shot(model: HiFiGAN, mel: torch.Tensor) -> np.ndarray:
    with torch.inference_mode():
        return model(mel)[0].numpy()


def _stream(sv: StreamingVocoder, mel: torch.Tensor, sizes: list[int]) -> np.ndarray:
    """Push mel in pieces of `sizes` (cycled), then flush; return all the audio."""
    out, t, i = [], 0, 0
    while t < mel.shape[2]:
        n = sizes[i % len(sizes)]
        out.append(sv.push(mel[:, :, t : t + n]))
        t, i = t + n, i + 1
    out.append(sv.flush())
    return np.concatenate(out)


def _push_patterns(seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(0, 40, size=12)] + [1]


@pytest.fixture(scope="module")
def models() -> dict[str, HiFiGAN]:
    return {"tiny": _vocoder("tiny"), "light": _vocoder("light")}


def test_receptive_field_of_presets() -> None:
    assert receptive_field_frames(VocoderConfig.preset("tiny")) == 6
    assert receptive_field_frames(VocoderConfig.preset("light")) == 14
    assert receptive_field_frames(VocoderConfig.preset("v1")) == 14


@pytest.mark.parametrize("preset", ["tiny", "light"])
def test_receptive_field_bounds_measured_impulse_response(models: dict[str, HiFiGAN], preset: str) -> None:
    model, t0, frames = models[preset], 30, 61
    mel = _mel(frames)
    bumped = mel.clone()
    bumped[:, :, t0] += 3.0
    changed = np.nonzero(np.abs(_one_shot(model, bumped) - _one_shot(model, mel)) > 0)[0] // HOP_LENGTH
    measured = int(max(t0 - changed.min(), changed.max() - t0))
    bound = receptive_field_frames(model)
    assert measured <= bound <= measured + 1, (measured, bound)


@pytest.mark.parametrize("preset", ["tiny", "light"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stream_matches_one_shot(models: dict[str, HiFiGAN], preset: str, seed: int) -> None:
    model = models[preset]
    frames = 150 if preset == "tiny" else 90
    mel = _mel(frames, seed=seed + 10)
    ref = _one_shot(model, mel)
    sv = StreamingVocoder(model, window_frames=16, context_frames=receptive_field_frames(model))
    got = _stream(sv, mel, _push_patterns(seed))
    assert got.shape == ref.shape == (frames * HOP_LENGTH,)
    assert got.dtype == np.float32
    assert np.abs(ref).max() > 0.05  # the signal is large enough for TOL to mean something
    assert np.abs(got - ref).max() <= TOL


def test_push_returns_audio_as_soon_as_a_window_has_right_context(models: dict[str, HiFiGAN]) -> None:
    sv = StreamingVocoder(models["tiny"], window_frames=8, context_frames=6)
    assert sv.push(_mel(13)).size == 0  # 8 new + 5 right context: not yet
    assert sv.push(_mel(1, seed=2)).size == 8 * HOP_LENGTH
    assert sv.push(torch.zeros(1, N_MELS, 0)).size == 0
    assert sv.flush().size == 6 * HOP_LENGTH
    assert sv.flush().size == 0


@pytest.mark.parametrize("preset", ["tiny", "light"])
def test_too_little_context_gives_larger_error(models: dict[str, HiFiGAN], preset: str) -> None:
    model = models[preset]
    mel = _mel(90)
    ref = _one_shot(model, mel)
    errors = {}
    for context in (0, 2, receptive_field_frames(model)):
        got = _stream(StreamingVocoder(model, window_frames=16, context_frames=context), mel, [7])
        errors[context] = float(np.abs(got - ref).max())
    assert errors[0] > 100 * TOL and errors[2] > 10 * TOL, errors
    assert errors[receptive_field_frames(model)] <= TOL, errors


@pytest.mark.parametrize("preset", ["tiny", "light"])
def test_no_jump_at_window_joins(models: dict[str, HiFiGAN], preset: str) -> None:
    model, window = models[preset], 16
    mel = _mel(96, seed=5)
    ref = _one_shot(model, mel)
    got = _stream(StreamingVocoder(model, window_frames=window, context_frames=16), mel, [5, 11])
    joins = np.arange(window, 96, window) * HOP_LENGTH  # first sample of each window after the first
    jumps, ref_jumps = np.abs(got[joins] - got[joins - 1]), np.abs(ref[joins] - ref[joins - 1])
    elsewhere = np.delete(np.abs(np.diff(got)), joins - 1)
    assert jumps.max() <= elsewhere.max()
    assert np.abs(jumps - ref_jumps).max() <= 2 * TOL


def test_crossfade_keeps_exactness_and_softens_joins_with_short_context(models: dict[str, HiFiGAN]) -> None:
    model = models["light"]
    mel = _mel(96, seed=6)
    ref = _one_shot(model, mel)
    exact = _stream(StreamingVocoder(model, window_frames=16, context_frames=16, crossfade_samples=256), mel, [9])
    assert np.abs(exact - ref).max() <= TOL
    joins = np.arange(16, 96, 16) * HOP_LENGTH

    def join_error(crossfade: int) -> float:
        sv = StreamingVocoder(model, window_frames=16, context_frames=4, crossfade_samples=crossfade)
        got = _stream(sv, mel, [9])
        return float(np.abs((got[joins] - got[joins - 1]) - (ref[joins] - ref[joins - 1])).max())

    # measured: 4.6e-3 without, 2.1e-3 with a 64-sample crossfade (context 4 < receptive field 14)
    assert join_error(64) < 0.7 * join_error(0)


def test_engine_tuple_output_and_bad_input(models: dict[str, HiFiGAN]) -> None:
    model = models["tiny"]
    mel = _mel(40)
    sv = StreamingVocoder(lambda m: (model(m),), window_frames=8, context_frames=6)
    got = np.concatenate([sv.push(mel), sv.flush()])
    assert np.abs(got - _one_shot(model, mel)).max() <= TOL
    with pytest.raises(ValueError, match=r"\[1, 80, t\]"):
        sv.push(torch.zeros(80, 4))
    with pytest.raises(ValueError, match="raise context_frames"):
        StreamingVocoder(model, context_frames=1, crossfade_samples=512)
