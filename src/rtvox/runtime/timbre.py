"""Timbre matching of cloned voices: a per-band log-mel offset measured once per reference clip.

A clone is conditioned on its clip's GE2E embedding, and the acoustic model renders a voice near it in the space
of its few dozen training speakers; the long-term spectrum of that rendering can still differ from the clip's
(brightness, the formant region, the recording's colour). Matching measures the gap once: the mean log-mel of
the clip's speech frames minus the mean over the model's own renderings of the CALIBRATION sentences with that
embedding, its mean over bands removed (a timbre, not a loudness: an upload's level must not set the clone's),
clipped to ±TIMBRE_CLIP nats per band and scaled by the model's `timbre_match` (config.json; 0 turns it off).
The result (`SynthesisRequest.speaker_timbre`; a clone keeps only its clip's spectrum, `Voice.spectrum`, so each
model derives its own) is added to every spoken frame of the clone's mel before the vocoder, beside the emotion
prior's spectral tilt. Measured in docs/QUALITY.md ("8.9.1").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from rtvox.audio.loudness import trim_silence
from rtvox.constants import N_MELS, SAMPLE_RATE

# Written for this purpose (not from any eval set or the corpus): two English and two Mandarin sentences, so a clip
# in either language is compared with the model speaking both.
CALIBRATION = (
    "The weather was calm, so we walked to the harbour and back before lunch.",
    "She kept every letter in a wooden box under her bed.",
    "周末我们去公园散步，看见很多人在湖边钓鱼。",
    "这家小店的面条又便宜又好吃，每天中午都排长队。",
)
TIMBRE_CLIP = 1.0  # nats per band, before the model's strength
SPEECH_QUANTILE = 0.3  # frames quieter than this quantile of the clip's frame levels are pauses, not timbre

MelFn = Callable[[torch.Tensor], torch.Tensor]  # audio [1, S] → log-mel [1, n_mels, T]


def speech_mel_mean(mel_fn: MelFn, audio: np.ndarray) -> np.ndarray:
    """Mean log-mel [n_mels] of a clip's speech: silence trimmed, then the frames above SPEECH_QUANTILE in level."""
    trimmed = trim_silence(np.asarray(audio, dtype=np.float32), SAMPLE_RATE)
    speech = np.ascontiguousarray(trimmed if trimmed.size else audio, dtype=np.float32)
    with torch.inference_mode():
        mel = mel_fn(torch.from_numpy(speech)[None])[0].float().cpu()
    level = mel.mean(0)
    loud = level >= torch.quantile(level, SPEECH_QUANTILE)
    return mel[:, loud].mean(1).numpy().astype(np.float64)


def timbre_offset(reference_mean: np.ndarray, rendered_means: Sequence[np.ndarray], strength: float) -> np.ndarray:
    """The per-band offset [n_mels] float32: strength · clip(reference − mean(rendered) − its band mean)."""
    if not rendered_means:
        raise ValueError("timbre matching needs at least one rendering of the calibration sentences")
    gap = np.asarray(reference_mean, np.float64) - np.mean(np.stack(rendered_means), 0)
    gap -= gap.mean()
    return (strength * np.clip(gap, -TIMBRE_CLIP, TIMBRE_CLIP)).astype(np.float32)


_RAMP = (np.arange(N_MELS, dtype=np.float64) - (N_MELS - 1) / 2) / N_MELS  # rtvox.models.prosody.tilt_ramp


def offset_row(tilt: float, timbre: np.ndarray | None) -> np.ndarray:
    """One row's whole log-mel offset [N_MELS] float32: the emotion prior's tilt along its ramp plus the timbre
    (numpy, for the host-side staging of batched steps: no torch call per row)."""
    row = tilt * _RAMP
    if timbre is not None:
        row = row + timbre
    return row.astype(np.float32)


__all__ = [
    "CALIBRATION",
    "TIMBRE_CLIP",
    "offset_row",
    "speech_mel_mean",
    "timbre_offset",
]
