"""Time-stretching for speeds the model cannot reach by itself.

OpenAI's API takes speed 0.25–4.0; the acoustic model takes SPEED_MIN..SPEED_MAX (0.5–2.0) by scaling phoneme
durations, which keeps pitch and sounds natural. A request outside that range gets the nearest model speed and
the rest as a WSOLA time-stretch of the audio (pitch kept, some smearing at the extremes): speed 4.0 is model 2.0
then ×2 stretch; 0.25 is model 0.5 then ×0.5. Each streamed chunk is stretched on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtvox.constants import SAMPLE_RATE, SPEED_MAX, SPEED_MIN

# 40 ms analysis windows at 50% overlap; the best-matching offset is searched within ±10 ms.
WINDOW = SAMPLE_RATE * 40 // 1000
TOLERANCE = SAMPLE_RATE * 10 // 1000


@dataclass(frozen=True)
class SpeedPlan:
    """How a requested speed is reached: the model's own rate, then a stretch factor (1.0 = none)."""

    model_speed: float  # passed to the acoustic model, SPEED_MIN..SPEED_MAX
    stretch: float  # playback-rate factor applied to the audio afterwards; >1 shortens

    @property
    def total(self) -> float:
        return self.model_speed * self.stretch


def plan_speed(speed: float) -> SpeedPlan:
    model = min(max(speed, SPEED_MIN), SPEED_MAX)
    return SpeedPlan(model_speed=model, stretch=speed / model)


def time_stretch(wav: np.ndarray, rate: float) -> np.ndarray:
    """`wav` played `rate` times as fast with its pitch kept (WSOLA); length round(len / rate)."""
    x = np.asarray(wav, dtype=np.float32)
    target = round(len(x) / rate)
    if abs(rate - 1.0) < 1e-6 or len(x) == 0:
        return x.copy()
    if len(x) < 2 * WINDOW:
        # Too short to overlap-add: resample the index (changes pitch, but this is under 80 ms of audio).
        idx = np.linspace(0, len(x) - 1, max(target, 1))
        return np.interp(idx, np.arange(len(x)), x).astype(np.float32)[:target]
    hop_out = WINDOW // 2
    hop_in = hop_out * rate
    window = np.hanning(WINDOW + 1)[:WINDOW].astype(np.float32)  # periodic Hann: overlaps sum to 1 at hop W/2
    pad = np.zeros(WINDOW + TOLERANCE, dtype=np.float32)
    padded = np.concatenate([pad, x, pad])
    offset = len(pad)
    frames = int(np.ceil(target / hop_out)) + 1
    out = np.zeros(frames * hop_out + WINDOW, dtype=np.float32)
    previous = offset  # input position of the last frame taken
    for k in range(frames):
        ideal = offset - hop_out + round(k * hop_in)  # output sample hop_out lines up with input sample 0
        if k == 0:
            start = ideal
        else:
            # Continue the waveform where the previous frame left off: pick the candidate that best matches it.
            natural = padded[previous + hop_out : previous + hop_out + WINDOW]
            lo = max(ideal - TOLERANCE, 0)
            hi = min(ideal + TOLERANCE, len(padded) - WINDOW)
            if hi <= lo:
                start = min(max(ideal, 0), len(padded) - WINDOW)
            else:
                region = padded[lo : hi + WINDOW]
                scores = np.correlate(region, natural, mode="valid")
                start = lo + int(np.argmax(scores))
        segment = padded[start : start + WINDOW]
        out[k * hop_out : k * hop_out + WINDOW] += segment * window
        previous = start
    # Output sample hop_out is input sample 0; before it the frames overlap only the zero padding.
    begin = hop_out
    result = out[begin : begin + target]
    if len(result) < target:
        result = np.concatenate([result, np.zeros(target - len(result), dtype=np.float32)])
    return np.clip(result, -1.0, 1.0).astype(np.float32)
