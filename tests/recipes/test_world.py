"""WORLD transforms: F0 moves by the requested ratio, range scales, envelope warps move formants."""

from __future__ import annotations

import numpy as np
import pytest

pyworld = pytest.importorskip("pyworld")

from recipes.corpus import world  # noqa: E402
from recipes.corpus.audio import SAMPLE_RATE  # noqa: E402


def _harmonic(f0: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Vowel-like test signal: harmonics of a per-sample F0 track with a 1/k roll-off and one formant bump."""
    phase = 2 * np.pi * np.cumsum(f0) / rate
    out = np.zeros_like(f0)
    for k in range(1, 40):
        freq = k * f0
        gain = (1 / k) * (1 + 3 * np.exp(-(((freq - 700) / 200) ** 2))) * (freq < rate / 2 - 500)
        out += gain * np.sin(k * phase)
    return (0.3 * out / np.max(np.abs(out))).astype(np.float32)


def _median_f0(audio: np.ndarray) -> float:
    f0, t = pyworld.dio(audio.astype(np.float64), SAMPLE_RATE, frame_period=5.0)
    f0 = pyworld.stonemask(audio.astype(np.float64), f0, t, SAMPLE_RATE)
    return float(np.median(f0[f0 > 0]))


@pytest.mark.parametrize("ratio", [0.6, 0.8, 1.25, 1.7])
def test_scale_f0_changes_measured_f0_by_ratio(ratio: float) -> None:
    audio = _harmonic(np.full(SAMPLE_RATE, 140.0))
    feat = world.analyze(audio)
    before = _median_f0(world.synthesize(feat))
    after = _median_f0(world.synthesize(world.scale_f0(feat, ratio)))
    assert before == pytest.approx(140.0, rel=0.03)
    assert after / before == pytest.approx(ratio, rel=0.03)


def test_range_scales_log_f0_spread_and_keeps_mean() -> None:
    glide = np.geomspace(110.0, 220.0, SAMPLE_RATE)
    feat = world.analyze(_harmonic(glide))
    mean0, std0 = world.log_f0_stats(feat.f0)
    mean1, std1 = world.log_f0_stats(world.scale_f0(feat, 1.0, 0.5).f0)
    assert mean1 == pytest.approx(mean0, abs=1e-9)
    assert std1 / std0 == pytest.approx(0.5, rel=1e-6)


def test_map_f0_hits_target_statistics() -> None:
    feat = world.analyze(_harmonic(np.geomspace(100.0, 160.0, SAMPLE_RATE)))
    target = (np.log(240.0), 0.2)
    mean, std = world.log_f0_stats(world.map_f0(feat, world.log_f0_stats(feat.f0), target).f0)
    assert (mean, std) == pytest.approx(target, rel=1e-6)


def test_warp_moves_envelope_peak() -> None:
    bins = 513
    freqs = world.bin_freqs(bins)
    sp = np.exp(-(((freqs - 1000.0) / 150.0) ** 2))[None, :] + 1e-4
    feat = world.WorldFeatures(np.full(1, 120.0), sp, np.full((1, bins), 0.1))
    for alpha in (0.87, 1.15):
        peak = freqs[np.argmax(world.warp_envelope(feat, alpha).sp[0])]
        assert peak == pytest.approx(1000.0 * alpha, abs=freqs[1] * 1.5)


def test_shape_f0_final_rise_and_voicing_kept() -> None:
    feat = world.WorldFeatures(np.where(np.arange(300) % 50 < 40, 150.0, 0.0), np.ones((300, 9)), np.ones((300, 9)))
    shaped = world.shape_f0(feat, final_rise=0.3)
    assert np.array_equal(shaped.f0 > 0, feat.f0 > 0)
    assert shaped.f0[:200][feat.f0[:200] > 0] == pytest.approx(150.0)
    last = 289  # last voiced frame; the rise is quadratic over the final third
    expected = 1 + 0.3 * ((last / 299 - 2 / 3) * 3) ** 2
    assert shaped.f0[last] == pytest.approx(150.0 * expected)
    assert shaped.f0[last] > shaped.f0[250] > 150.0


def test_clean_voicing_bridges_dropouts_and_drops_islands() -> None:
    voiced_a, gap, voiced_b = [100.0] * 3, [0.0] * 2, [121.0] * 3
    f0 = np.array([0, 0, *voiced_a, *gap, *voiced_b, *[0] * 6, 90, 90, *[0] * 4], float)
    out = world.clean_voicing(f0)
    assert out[5:7] == pytest.approx([100 * 1.21 ** (1 / 3), 100 * 1.21 ** (2 / 3)])
    assert np.all(out[10:16] == 0)  # a 6-frame gap is a real pause
    assert np.all(out[16:18] == 0)  # a 2-frame voiced island is spurious
    assert out[2:5] == pytest.approx(voiced_a) and out[7:10] == pytest.approx(voiced_b)


def test_tilt_gain_is_zero_at_pivot_and_signed() -> None:
    gain = world.tilt_db(513, 2.0)
    freqs = world.bin_freqs(513)
    assert gain[np.argmin(np.abs(freqs - 1000))] == pytest.approx(0.0, abs=0.05)
    assert gain[np.argmin(np.abs(freqs - 4000))] == pytest.approx(4.0, abs=0.05)


def test_teacher_clip_f0_ratio() -> None:
    """On real teacher speech (eSpeak NG: fast, from PyPI) the transform still moves F0 by the ratio."""
    from recipes.corpus.teachers import TeacherPool, TeacherUnavailable

    try:
        audio = TeacherPool().get("espeak-en-f").synthesize("We walked along the quiet river at dawn.").audio
    except TeacherUnavailable as err:
        pytest.skip(str(err))
    feat = world.analyze(audio)
    before = _median_f0(world.synthesize(feat))
    after = _median_f0(world.synthesize(world.scale_f0(feat, 0.75)))
    assert after / before == pytest.approx(0.75, rel=0.05)
