"""Every path vocodes a chunk's end alike: the captured pipeline (its frame buckets padded with silence) against
the eager step, on the shipped model, where speech runs up to a chunk's last frame."""

from __future__ import annotations

import torch

from rtvox.engines.quality import log_mel_l1
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest


def test_graphs_and_eager_agree_at_a_chunk_end_on_the_shipped_model() -> None:
    # rtvox-small 7.0.x ends "您好，" on a 1-frame pause, so speech reaches the chunk's last frame and the last
    # ~0.3 s of audio depend on what the vocoder sees past it (log-mel L1 0.121 when the two paths differed there).
    eager = Synthesizer("rtvox-small", device="cpu", backend="eager")
    graphs = Synthesizer("rtvox-small", device="cpu", backend="graphs", dtype="float32")
    text = "您好，请问有什么可以帮您？您的订单已经发货，预计周四送达。"
    # a first-chunk cap of 10 phonemes lowers the first chunk's floor (rtvox.text.chunking) to 5: "您好，" alone
    front = eager.frontend.process(text, first_chunk_phonemes=10)
    prepared = eager.prepare(SynthesisRequest(text=text), front)
    assert prepared.chunks[0].text == "您好，"
    job = ChunkJob(prepared, 0)
    want, got = eager.run_step([job])[0], graphs.run_step([job])[0]
    assert got.durations == want.durations and got.audio.shape == want.audio.shape
    assert log_mel_l1(torch.from_numpy(got.audio)[None], torch.from_numpy(want.audio)[None]) < 1e-3
