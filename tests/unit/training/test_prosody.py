"""Pitch and energy targets: per-speaker normalization keeps what an emotion does to a voice's level."""

from __future__ import annotations

import numpy as np
import torch

from rtvox.training.acoustic import targets
from rtvox.training.data import AcousticSet, PackInfo, speaker_prosody_stats

INFO = PackInfo(
    speakers=["a", "b"],
    emotions=["neutral", "happy"],
    mel_lo=-11.5,
    mel_hi=2.0,
    mel_levels=256,
    f0_lo=50.0,
    f0_hi=800.0,
)


def _f0_code(hz: float) -> int:
    lo, hi = np.log(INFO.f0_lo), np.log(INFO.f0_hi)
    return round(float((np.log(hz) - lo) / (hi - lo) * 254 + 1))


def _dataset() -> AcousticSet:
    # speaker 0: a neutral utterance at 100 Hz and a "happy" one at 130 Hz, 10 frames each; speaker 1 at 200 Hz
    f0 = np.array([_f0_code(100)] * 10 + [_f0_code(130)] * 10 + [_f0_code(200)] * 10, np.uint8)
    mel = np.full((30, 80), 128, np.uint8)
    mel[10:20] = 150  # the happy one is louder
    return AcousticSet(
        info=INFO,
        ids=np.ones(6, np.uint16),
        mel=mel,
        f0=f0,
        ph_off=np.array([0, 2, 4, 6]),
        mel_off=np.array([0, 10, 20, 30]),
        ge2e=np.zeros((3, 256), np.float32),
        speaker=np.array([0, 0, 1]),
        emotion=np.array([0, 1, 0]),
        lang=np.zeros(3, np.int64),
        utt=["n", "h", "b"],
    )


def test_speaker_stats_and_targets_keep_the_emotion_level() -> None:
    data = _dataset()
    stats = speaker_prosody_stats(data)
    assert stats.shape == (2, 4)
    assert 100 < np.exp(stats[0, 0]) < 130 and abs(np.exp(stats[1, 0]) - 200) < 3
    from rtvox.training.data import collate_acoustic

    batch = collate_acoustic(data, np.array([0, 1]), torch.device("cpu"))
    durations = torch.tensor([[5, 5], [5, 5]])
    _, pitch_spk, energy_spk = targets(batch, durations, torch.from_numpy(stats))
    _, pitch_utt, _ = targets(batch, durations)
    assert float(pitch_spk[1].mean()) > 0.5 > -0.5 > float(pitch_spk[0].mean())  # happy above, neutral below
    assert float(energy_spk[1].mean()) > float(energy_spk[0].mean())
    assert abs(float(pitch_utt[1].mean())) < 1e-3 and abs(float(pitch_utt[0].mean())) < 1e-3  # erased
