from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rtvox.audio import integrated_loudness, normalize_loudness, peak_limit, rms_dbfs, trim_silence
from rtvox.audio.loudness import DEFAULT_MARGIN_SECONDS, FRAME_SECONDS, HOP_SECONDS, peak_dbfs, speech_bounds

SR = 24_000
Speech = Callable[..., np.ndarray]


def test_levels_of_known_signals() -> None:
    t = np.arange(SR) / SR
    sine = np.sin(2 * np.pi * 1000 * t)
    assert rms_dbfs(sine) == pytest.approx(-3.01, abs=0.01)
    assert peak_dbfs(0.5 * sine) == pytest.approx(-6.02, abs=0.01)
    assert rms_dbfs(np.zeros(10)) == float("-inf")
    assert rms_dbfs(np.zeros(0)) == float("-inf")
    # BS.1770 calibration: a 0 dBFS 1 kHz sine reads -3.01 LKFS.
    loudness = integrated_loudness(sine, SR)
    assert loudness is not None and loudness == pytest.approx(-3.01, abs=0.1)


@pytest.mark.parametrize("level", [0.03, 0.1, 0.5])
@pytest.mark.parametrize("target", [-23.0, -20.0])
def test_normalize_loudness_reaches_target(level: float, target: float, speech: Speech) -> None:
    wav = speech(SR, 2.0, level=level)
    out = normalize_loudness(wav, SR, target)
    assert out.dtype == np.float32
    measured = integrated_loudness(out, SR)
    assert measured is not None and measured == pytest.approx(target, abs=0.2)
    assert np.max(np.abs(out)) <= 10 ** (-1 / 20) + 1e-6


def test_short_clip_falls_back_to_rms(speech: Speech) -> None:
    wav = speech(SR, 0.2, level=0.05)
    assert integrated_loudness(wav, SR) is None
    out = normalize_loudness(wav, SR, -20.0)
    assert rms_dbfs(out) == pytest.approx(-20.0, abs=0.01)


def test_gain_is_capped_for_near_silence() -> None:
    noise = (1e-4 * np.random.default_rng(0).standard_normal(SR)).astype(np.float32)
    out = normalize_loudness(noise, SR, -20.0, max_gain_db=30.0)
    assert rms_dbfs(out) - rms_dbfs(noise) == pytest.approx(30.0, abs=0.01)


def test_silence_and_empty_are_unchanged() -> None:
    np.testing.assert_array_equal(normalize_loudness(np.zeros(SR, np.float32), SR), np.zeros(SR))
    assert normalize_loudness(np.zeros(0, np.float32), SR).shape == (0,)


def test_loud_target_is_peak_limited(speech: Speech) -> None:
    out = normalize_loudness(speech(SR, 1.0), SR, target_lufs=0.0)
    assert peak_dbfs(out) == pytest.approx(-1.0, abs=1e-4)


def test_peak_limit_only_reduces() -> None:
    wav = np.array([0.0, 0.5, -1.5, 0.25], np.float32)
    out = peak_limit(wav, ceiling_db=0.0)
    np.testing.assert_allclose(out, wav / 1.5)
    quiet = np.array([0.1, -0.2], np.float32)
    np.testing.assert_array_equal(peak_limit(quiet), quiet)
    assert peak_limit(np.zeros(0, np.float32)).shape == (0,)


def test_trim_silence_cuts_both_ends(speech: Speech) -> None:
    voiced = speech(SR, 1.0)
    wav = np.concatenate([np.zeros(SR // 2), voiced, 1e-4 * np.ones(SR)]).astype(np.float32)
    start, end = speech_bounds(wav, SR)
    margin, frame, hop = DEFAULT_MARGIN_SECONDS * SR, FRAME_SECONDS * SR, HOP_SECONDS * SR
    # Frames that only overlap the speech count as speech, so bounds may widen by up to a frame.
    onset, offset = SR // 2, SR // 2 + SR
    assert onset - margin - frame <= start <= onset - margin
    assert offset + margin <= end <= offset + margin + frame + hop
    trimmed = trim_silence(wav, SR)
    assert trimmed.shape[0] == end - start and trimmed.dtype == np.float32


def test_trim_keeps_internal_pauses(speech: Speech) -> None:
    word = speech(SR, 0.5)
    wav = np.concatenate([word, np.zeros(SR), word]).astype(np.float32)
    assert trim_silence(wav, SR, margin_seconds=0.0).shape[0] == wav.shape[0]


def test_trim_silence_edge_cases(speech: Speech) -> None:
    assert trim_silence(np.zeros(SR, np.float32), SR).shape == (0,)
    assert trim_silence(np.zeros(0, np.float32), SR).shape == (0,)
    tiny = speech(SR, 0.01)  # shorter than one analysis frame
    assert trim_silence(tiny, SR).shape == tiny.shape
    # A uniformly quiet clip has nothing 40 dB below its loudest frame: nothing is cut.
    quiet = (1e-3 * np.random.default_rng(1).standard_normal(SR)).astype(np.float32)
    assert trim_silence(quiet, SR).shape == quiet.shape


@pytest.mark.parametrize("top_db", [20.0, 60.0])
def test_top_db_sets_the_threshold(top_db: float) -> None:
    t = np.arange(SR) / SR
    loud = np.sin(2 * np.pi * 300 * t).astype(np.float32)
    soft = loud * np.float32(10 ** (-40 / 20))  # 40 dB down: silence at top_db=20, speech at 60
    wav = np.concatenate([soft, loud, soft])
    kept = trim_silence(wav, SR, top_db=top_db, margin_seconds=0.0).shape[0]
    assert kept == pytest.approx(SR if top_db == 20.0 else 3 * SR, abs=0.04 * SR)
