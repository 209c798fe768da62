"""How much a chunk's audio depends on what the vocoder sees past its end: each chunk of the serving probe's
requests (benchmarks/probes/gpu_serving_probe.py) decoded once in fp32 on the CPU, then vocoded as is and with
silence frames appended up to the frame bucket of the `serve` shape profile (what the `graphs` pipeline feeds its
vocoder, rtvox.engines.pipeline), and the log-mel L1 of the two waveforms over the chunk's own samples printed
per chunk.

    .venv/bin/python benchmarks/probes/vocoder_edge_probe.py models/rtvox-small [OTHER_MODEL ...]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from rtvox.engines.quality import log_mel_l1
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.acoustic import MEL_PAD_VALUE
from rtvox.models.bundle import ModelBundle
from rtvox.runtime.steps import ChunkJob, encode_inputs, encode_row
from rtvox.runtime.synthesizer import Synthesizer


def main() -> None:
    spec = importlib.util.spec_from_file_location("serving_probe", Path(__file__).with_name("gpu_serving_probe.py"))
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    frame_buckets = ShapeProfile.preset("serve").frames
    for model in sys.argv[1:]:
        synth = Synthesizer(model, device="cpu", backend="eager")
        bundle = synth.bundle
        if not isinstance(bundle, ModelBundle):
            raise SystemExit(f"{model}: not a FastSpeech-family model")
        jobs = [ChunkJob(q, i) for q in map(synth.prepare, probe.REQUESTS) for i in range(len(q.chunks))]
        row = []
        for job in jobs:
            inputs = encode_inputs([encode_row(job)], torch.device("cpu"))
            with torch.inference_mode():
                hidden, durations = bundle.acoustic.encode(*inputs)[:2]
                mel = bundle.acoustic.decode(hidden, durations)
                frames = mel.shape[2]
                alone = bundle.vocoder(mel).flatten()
                silence = torch.full((1, mel.shape[1], frame_buckets.bucket(frames) - frames), MEL_PAD_VALUE)
                padded = bundle.vocoder(torch.cat([mel, silence], 2)).flatten()[: alone.shape[0]]
            row.append(round(log_mel_l1(padded[None], alone[None]), 3))
        print(model, row, flush=True)


if __name__ == "__main__":
    main()
