"""How much a chunk's audio depends on what the vocoder sees past its end, before and after the chunk-end rule
(rtvox.models.vocoder.end_silence_frames: every path vocodes a chunk followed by that much silence). Each chunk of
the serving probe's requests (benchmarks/probes/gpu_serving_probe.py), fp32 on the CPU, log-mel L1 per chunk over
the chunk's own samples:

- `before`: the two edges the paths used to give a chunk: its mel vocoded as is (the eager step: the convolutions'
  zero padding past the end) against its mel with silence frames appended up to the `serve` shape profile's frame
  bucket (the `graphs` pipeline, rtvox.engines.pipeline);
- `after`: the chunk as the two backends now serve it, `Synthesizer(backend="graphs", dtype="float32")` against
  `backend="eager"`, whole steps (durations checked equal).

    .venv/bin/python benchmarks/probes/vocoder_edge_probe.py models/rtvox-small [OTHER_MODEL ...]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from rtvox.engines.quality import log_mel_l1
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle
from rtvox.models.vocoder import with_end_silence
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
        graphs = Synthesizer(model, device="cpu", backend="graphs", dtype="float32")
        bundle = synth.bundle
        if not isinstance(bundle, ModelBundle):
            raise SystemExit(f"{model}: not a FastSpeech-family model")
        jobs = [ChunkJob(q, i) for q in map(synth.prepare, probe.REQUESTS) for i in range(len(q.chunks))]
        before: list[float] = []
        after: list[str] = []
        for job in jobs:
            inputs = encode_inputs([encode_row(job)], torch.device("cpu"))
            with torch.inference_mode():
                hidden, durations = bundle.acoustic.encode(*inputs)[:2]
                mel = bundle.acoustic.decode(hidden, durations)
                frames = mel.shape[2]
                alone = bundle.vocoder(mel).flatten()
                bucket = frame_buckets.bucket(frames)
                padded = bundle.vocoder(with_end_silence(mel, bucket - frames)).flatten()[: alone.shape[0]]
            before.append(round(log_mel_l1(padded[None], alone[None]), 3))
            (want,), (got,) = synth.run_step([job]), graphs.run_step([job])
            assert got.durations == want.durations and got.audio.shape == want.audio.shape
            after.append(f"{log_mel_l1(torch.from_numpy(got.audio)[None], torch.from_numpy(want.audio)[None]):.0e}")
        print(model, "end silence", synth.vocoder_end_frames, "frames", flush=True)
        print("  before", before, flush=True)
        print("  after ", " ".join(after), flush=True)


if __name__ == "__main__":
    main()
