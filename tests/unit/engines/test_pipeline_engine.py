"""PipelineEngine (two captured programs per bucket; the GPU fast path) against the eager engines, on the CPU
where its programs run uncaptured: same frame counts, the same audio to each row's end (both vocode a row
followed by the chunk-end silence, rtvox.models.vocoder.end_silence_frames)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rtvox.constants import HOP_LENGTH
from rtvox.engines.build import build_engines
from rtvox.engines.pipeline import DeviceSpans, PipelineEngine, plan_decode_groups
from rtvox.engines.quality import random_inputs, run_pipeline
from rtvox.engines.shapes import AxisRange, ShapeProfile
from rtvox.models.bundle import ModelBundle
from rtvox.models.vocoder import end_silence_frames
from rtvox.runtime.timbre import offset_row

from .conftest import CPU

# (row lengths, exact frame targets; 0 = the model's own durations): one row, ragged batches of two, a row that
# fills a frame bucket exactly (it needs the next one, for its end silence).
CASES = [([11], [70]), ([5, 14], [40, 120]), ([9, 30], [0, 0]), ([8], [64])]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fp32_pipeline_matches_eager(bundle: ModelBundle, case: int) -> None:
    lengths, targets = CASES[case]
    cfg = bundle.config.acoustic
    inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=7 + case)
    engine = PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
    wav, frames = engine(inputs)
    end = end_silence_frames(bundle.config.vocoder)
    ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU, end_frames=end)
    assert torch.equal(frames, ref_frames)
    assert wav.shape == ref.shape and wav.dtype == torch.float32
    # The bucket holds at least the chunk-end silence past every row: beyond it nothing reaches a row's samples.
    torch.testing.assert_close(wav, ref, rtol=0, atol=1e-4)
    for row, n in enumerate(frames.tolist()):
        assert not wav[row, n * HOP_LENGTH :].any()  # nothing past a row's own length


def test_bf16_pipeline_is_close_and_reuses_its_buckets(bundle: ModelBundle) -> None:
    cfg = bundle.config.acoustic
    engine = PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), compile_mode=None)
    for seed, (lengths, targets) in enumerate(CASES[:2]):
        inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=30 + seed)
        wav, frames = engine(inputs)
        end = end_silence_frames(bundle.config.vocoder)
        ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU, end_frames=end)
        assert torch.equal(frames, ref_frames)  # the encoder runs in fp32: durations are eager's
        assert float((wav - ref).abs().max()) < 0.05 * float(ref.abs().max())
    engine(random_inputs([12], cfg.cond_dim, cfg.vocab_size, [60], seed=99))
    assert set(engine._slots) == {(1, 16), (2, 16)}  # (batch, phoneme) buckets of the ci profile
    with pytest.raises(Exception, match="phonemes"):
        engine(random_inputs([65], cfg.cond_dim, cfg.vocab_size, [60], seed=1))  # past the profile


def test_encoder_weights_kept_in_fp16_compute_like_fp32(bundle: ModelBundle) -> None:
    """Weights fp16 holds exactly (as the shipped fp16 safetensors are) stay fp16 on the device and give the
    fp32 encoder's results; a weight fp16 would round is left in fp32."""
    from rtvox.engines.modules import store_weights_fp16

    half_bundle = copy.deepcopy(bundle)
    with torch.no_grad():
        for param in half_bundle.acoustic.parameters():
            param.copy_(param.half().float())
    cfg = bundle.config.acoustic
    inputs = random_inputs([9, 20], cfg.cond_dim, cfg.vocab_size, [0, 0], seed=5)
    stored = PipelineEngine(half_bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
    plain = PipelineEngine(
        half_bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None, encode_weights_fp16=False
    )
    assert stored.info["encode_weights_fp16_mb"] > 0
    dtypes = {t.dtype for t in stored.encoder.state_dict().values() if t.numel() >= 4096}
    assert dtypes == {torch.float16}
    (wav_a, frames_a), (wav_b, frames_b) = stored(inputs), plain(inputs)
    assert torch.equal(frames_a, frames_b)
    torch.testing.assert_close(wav_a, wav_b, rtol=0, atol=1e-6)
    # a weight fp16 would round stays fp32; one it holds exactly is stored
    layer = torch.nn.Linear(128, 128)
    assert store_weights_fp16(layer) == 0 and layer.weight.dtype == torch.float32
    with torch.no_grad():
        layer.weight.copy_(layer.weight.half().float())
    assert store_weights_fp16(layer) == 128 * 128 * 2 and layer.weight.dtype == torch.float32
    assert layer.parametrizations.weight.original.dtype == torch.float16


BATCH = AxisRange(1, 1, 8, (1, 2, 4, 8))
FRAMES = AxisRange(1, 1, 1024, (128, 256, 512, 1024))


@pytest.mark.parametrize(
    ("lengths", "launch_cost", "want"),
    [
        ([100, 120, 90], 0, [[2, 0, 1]]),  # one frame bucket: one group, shortest first
        ([1000, 100, 110, 900], 0, [[1, 2], [3, 0]]),  # two buckets far apart: split
        ([1000, 100, 110, 900], 10**6, [[1, 2, 3, 0]]),  # launches dear: one group
        # 300 joining the 100s pads them to 512 (a batch of 4 x 512); joining 1000 costs one 1024-frame row more
        ([100, 300, 120, 1000], 200, [[0, 2], [1], [3]]),
        ([100, 300, 120, 1000], 900, [[0, 2], [1, 3]]),
    ],
)
def test_decode_groups_split_where_padding_costs_more_than_a_launch(
    lengths: list[int], launch_cost: int, want: list[list[int]]
) -> None:
    assert plan_decode_groups(lengths, BATCH, FRAMES, launch_cost) == want


def test_decode_groups_cover_every_row_once_and_never_cost_more_than_one_group() -> None:
    g = torch.Generator().manual_seed(3)
    for trial in range(50):
        lengths = torch.randint(1, 1025, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
        cost = 300 * (trial % 4)
        groups = plan_decode_groups(lengths, BATCH, FRAMES, cost)
        assert sorted(r for group in groups for r in group) == list(range(len(lengths)))
        for group in groups:
            assert [lengths[r] for r in group] == sorted(lengths[r] for r in group)

        def price(group: list[int], lengths: list[int] = lengths, cost: int = cost) -> int:
            return BATCH.bucket(len(group)) * FRAMES.bucket(lengths[group[-1]]) + cost

        assert sum(map(price, groups)) <= price(sorted(range(len(lengths)), key=lengths.__getitem__))


def test_grouped_decode_serves_each_row_like_eager(bundle: ModelBundle) -> None:
    """Rows of very different lengths run as separate decode programs (free launches), each in its own batch
    and frame bucket, and still give eager's frames and audio row by row."""
    cfg = bundle.config.acoustic
    inputs = random_inputs([6, 20], cfg.cond_dim, cfg.vocab_size, [40, 200], seed=11)
    engine = PipelineEngine(
        bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None, group_launch_cost=0
    )
    rows, lengths, durations = engine.run_rows(inputs)
    end = end_silence_frames(bundle.config.vocoder)
    ref, ref_frames = run_pipeline(build_engines(bundle, "eager", CPU), inputs, CPU, end_frames=end)
    assert lengths == ref_frames.tolist() == [40, 200]
    assert durations.shape == (2, 20) and durations.sum(1).tolist() == lengths
    assert set(engine._decode_slots) == {(1, 64)}  # two groups of one row: batch bucket 1
    assert set(engine._decode_slots[(1, 64)].decoders) == {64, 256}
    for row, samples in enumerate(rows):
        n = lengths[row] * HOP_LENGTH
        assert samples.shape == (n,)
        torch.testing.assert_close(samples, ref[row, :n], rtol=0, atol=1e-4)


class _FakeEvent:
    """Duck-typed CUDA event: a timestamp in ms, done or not."""

    def __init__(self, ms: float, done: bool = True) -> None:
        self.ms, self.done = ms, done

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end: _FakeEvent) -> float:
        return end.ms - self.ms


def test_device_spans_fold_in_finished_steps_only(bundle: ModelBundle) -> None:
    spans = DeviceSpans()
    spans.add(_FakeEvent(0), _FakeEvent(2), _FakeEvent(3), _FakeEvent(10))  # encode 2 ms, decode 7 ms
    running = _FakeEvent(30, done=False)
    spans.add(_FakeEvent(20), _FakeEvent(21), _FakeEvent(22), running)  # still on the device
    assert spans.totals() == {"steps": 1, "encode_s": pytest.approx(0.002), "decode_s": pytest.approx(0.007)}
    running.done = True
    spans.host_phase("d2h", 0.004)
    spans.host_phase("d2h", 0.002)
    assert spans.totals() == {
        "steps": 2,
        "encode_s": pytest.approx(0.003),
        "decode_s": pytest.approx(0.015),
        "host_d2h_s": pytest.approx(0.006),
    }
    assert PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None).spans is None


def test_launched_rows_reach_the_host_as_run_rows_gives_them(bundle: ModelBundle) -> None:
    """The serving step's form (numpy in, one host block out, rows cut per decode group) gives each row the
    samples and durations `run_rows` gives on the device; its staging is reused and rewritten in full by the
    next, shorter batch of the same bucket (no phonemes, rows or log-mel offsets of the last one left behind)."""
    cfg = bundle.config.acoustic
    engine = PipelineEngine(
        bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None, group_launch_cost=0
    )
    for seed, (lengths, targets, tilts) in enumerate(
        [([6, 20], [40, 200], [0.0, 0.5]), ([4], [30], [-0.3]), ([18, 5], [0, 0], [0.2, 0.0])]
    ):
        inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=20 + seed)
        offset = torch.from_numpy(np.stack([offset_row(t, None) for t in tilts]))  # the tilts along their ramp
        offset[0, :40] += 0.25  # and a timbre on the first row's lower bands
        arrays = [t.numpy() for t in inputs.tensors("cpu")] + [offset.numpy()]
        samples, durations = engine.launch_rows(arrays)()
        rows, frames, want = engine.run_rows(inputs, offset)
        assert durations.dtype == np.int64 and durations.tolist() == want.tolist()
        assert durations.sum(1).tolist() == frames
        assert [s.dtype for s in samples] == [np.float32] * len(lengths)
        for got, ref in zip(samples, rows, strict=True):
            np.testing.assert_array_equal(got, ref.numpy())
        fresh = PipelineEngine(bundle, CPU, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
        alone, _ = fresh.launch_rows(arrays)()
        for got, ref in zip(samples, alone, strict=True):
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)


def test_host_blocks_are_reused_only_once_no_view_of_them_is_alive() -> None:
    from rtvox.engines.pipeline import _HostBlocks

    pool = _HostBlocks(pin=False, max_blocks=3)
    tensor, flat, pooled = pool.take(1000)
    assert tensor.numel() == flat.size == 1 << 20 and pooled  # rounded up to 4 MiB
    row = flat[5:10].reshape(5, 1)  # a chunk's audio: a view of the block
    del tensor, flat
    assert pool.take(1000)[1] is pool.blocks[1][1]  # the first is still in use through `row`
    del row
    assert pool.take(2 << 20)[1] is pool.blocks[2][1]  # larger than both: a new block
    assert pool.take(1000)[1] is pool.blocks[0][1]  # free again: reused
    held = [pool.take(10)[1] for _ in range(3)]  # every block in use...
    assert pool.take(10)[2] is False and len(pool.blocks) == 3  # ...and the pool full: a one-off block
    del held
    big = pool.take(3 << 20)  # bigger than any, the pool full: a free block makes room for it
    assert big[2] and big[1].size == 3 << 20 and len(pool.blocks) == 3
