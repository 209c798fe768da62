"""Training fixtures: the pack table of the small hand-made AcousticSets the unit tests build."""

from __future__ import annotations

from rtvox.training.data import PackInfo

# three speakers, three emotions; mel codes over [-12, 4] nats in 256 levels, F0 codes over 50-800 Hz
PACK_INFO = PackInfo(
    speakers=["a", "b", "c"],
    emotions=["neutral", "happy", "sad"],
    mel_lo=-12.0,
    mel_hi=4.0,
    mel_levels=256,
    f0_lo=50.0,
    f0_hi=800.0,
)
