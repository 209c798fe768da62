"""Probe (CPU, nothing ships): is the silence over a chunk's first phoneme the energy predictor's doing?

    .venv/bin/python benchmarks/probes/zero_initial_energy_probe.py \
        > benchmarks/results/quality/zero_initial_energy_probe.txt

Patches VarianceAdaptor.infer to print the first phonemes' predicted pitch, energy and durations ("show": the
model as shipped), then to lift the first phoneme's energy to its neighbour's ("e"), and its pitch too ("ep");
per text: the first phoneme, its frames, the audio's RMS over them (dBFS) and what Whisper base hears (beam 5,
0.33 s of silence on each side, as `rtvox eval`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.models import variance
from rtvox.runtime.synthesizer import Synthesizer

TEXTS: tuple[tuple[str, str], ...] = (
    ("啊，今天天气真好。", "zh"),
    ("爱是一种力量。", "zh"),
    ("一个人去看电影。", "zh"),
    ("Apples are red.", "en"),
    ("a", "en"),
    ("I am here.", "en"),
    ("他说今天天气真好。", "zh"),
    ("The apples are red.", "en"),
)
MODE = {"now": "show"}


def patched_infer(
    self: variance.VarianceAdaptor,
    x: Tensor,
    mask: Tensor,
    speed: Tensor,
    target_frames: Tensor,
    pitch_scale: Tensor,
    energy_scale: Tensor,
    prosody: Tensor,
) -> tuple[Tensor, Tensor]:
    """VarianceAdaptor.infer as shipped, with the probe's prints and overrides."""
    mode = MODE["now"]
    frames = torch.expm1(self.duration(x, mask)).clamp_min(0.0) * prosody[:, 3:4]
    durations = variance.regulate_durations(frames, mask, speed, target_frames)
    pitch = self.pitch(x, mask)
    pitch = pitch + (prosody[:, 1:2] - 1.0) * (pitch - variance.masked_mean(pitch, mask)) + prosody[:, 0:1]
    pitch = pitch * pitch_scale[:, None]
    if self.pitch_bounds is not None:
        pitch = pitch.clamp(self.pitch_bounds[0], self.pitch_bounds[1])
    if "p" in mode and pitch.shape[1] > 1:
        pitch[:, 0] = pitch[:, 1]
    x = x + self.pitch_embed(pitch, mask)
    energy = (self.energy(x, mask) + prosody[:, 2:3]) * energy_scale[:, None]
    if mode == "show":
        print("  pitch", [round(v, 2) for v in pitch[0, :4].tolist()], "energy",
              [round(v, 2) for v in energy[0, :4].tolist()], "frames", durations[0, :4].tolist())  # fmt: skip
    if "e" in mode and energy.shape[1] > 1:
        energy[:, 0] = torch.maximum(energy[:, 0], energy[:, 1])
    return x + self.energy_embed(energy, mask), durations


def main() -> None:
    variance.VarianceAdaptor.infer = patched_infer  # type: ignore[method-assign]
    synth = Synthesizer(device="cpu")
    judge = WhisperJudge()
    pad = np.zeros(int(0.33 * SAMPLE_RATE), np.float32)
    for mode in ("show", "e", "ep"):
        MODE["now"] = mode
        for text, lang in TEXTS:
            result = synth.synthesize(text)
            wav = np.asarray(result.audio, dtype=np.float32)
            chunk = result.chunks[0]
            spoken = [(p, d) for p, d in zip(chunk.phonemes, chunk.durations, strict=True) if d > 0]
            first, first_frames = spoken[0]
            span = wav[: first_frames * HOP_LENGTH]
            dbfs = 20 * np.log10(np.sqrt(np.mean(span**2)) + 1e-9)
            heard = judge.transcribe(np.concatenate([pad, wav, pad]), SAMPLE_RATE, lang).text
            print(mode, text, first, first_frames, f"{dbfs:.1f} dBFS", "->", heard, flush=True)


if __name__ == "__main__":
    main()
