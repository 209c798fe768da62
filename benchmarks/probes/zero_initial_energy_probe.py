"""Probe (CPU, nothing ships): is the silence over a chunk's first phoneme the energy predictor's doing?

    .venv/bin/python benchmarks/probes/zero_initial_energy_probe.py 2>/dev/null \
        > benchmarks/results/quality/zero_initial_energy_probe.txt

Hooks the variance adaptor's pitch and energy predictors to print the first phonemes' raw predictions ("show": the
model as shipped, neutral), then to lift the first phoneme's energy to its neighbour's ("e"), and its pitch too ("ep");
per text: the first phoneme, its frames, the audio's RMS over them (dBFS) and what Whisper base hears (beam 5,
0.33 s of silence on each side, as `rtvox eval`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from zero_initial_probe import first_slot, hear  # the first slot and the hearing as measured there

from rtvox.eval.asr import WhisperJudge
from rtvox.models.bundle import ModelBundle
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


def lift_first(module: torch.nn.Module, inputs: tuple[Tensor, ...], out: Tensor) -> Tensor:
    """A forward hook on a predictor ([B, N] out): print its first values ("show"), or lift the first phoneme's
    value to its neighbour's when the mode names it ("e": energy, "p": pitch)."""
    name = "energy" if module is ENERGY[0] else "pitch"
    if MODE["now"] == "show":
        print(f"  {name}", [round(v, 2) for v in out[0, :4].tolist()])
    elif name[0] in MODE["now"] and out.shape[1] > 1:
        out = out.clone()
        out[:, 0] = torch.maximum(out[:, 0], out[:, 1]) if name == "energy" else out[:, 1]
    return out


ENERGY: list[torch.nn.Module] = []


def main() -> None:
    synth = Synthesizer(device="cpu")
    assert isinstance(synth.bundle, ModelBundle), "the default (FastSpeech) family"
    adaptor = synth.bundle.acoustic.variance
    ENERGY.append(adaptor.energy)
    adaptor.energy.register_forward_hook(lift_first)
    adaptor.pitch.register_forward_hook(lift_first)
    judge = WhisperJudge()
    for mode in ("show", "e", "ep"):
        MODE["now"] = mode
        for text, lang in TEXTS:
            result = synth.synthesize(text)
            wav = np.asarray(result.audio, dtype=np.float32)
            first, first_frames, dbfs = first_slot(result, wav)
            heard = hear(judge, wav, lang)
            frames = list(result.chunks[0].durations[:4])
            print(mode, text, first, first_frames, f"{dbfs:.1f} dBFS", "->", heard, "| frames", frames, flush=True)


if __name__ == "__main__":
    main()
