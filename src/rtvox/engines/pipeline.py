"""The whole acoustic → vocoder chain as two captured programs per shape bucket (the GPU fast path).

Per-module engines pay, on every call, a graph launch, the copy of their inputs into static buffers, the cut
of their outputs and a host read of the frame count between encode and decode; on an H200 that host side was
half of the compiled pipeline's 3.4 ms for a 10-s utterance (benchmarks/probes/gpu_pipeline_probe.py). Here:

    inputs ─padded into the bucket's pinned staging block, one copy─► [encode program]  (batch, phoneme) bucket
           ─one host read: every row's frame count─► rows grouped by length (`plan_decode_groups`)
           ─► per group: its rows' encoder outputs gathered into the static inputs of a
              [decode + vocoder program]  (batch, phoneme, frame) bucket, the frame mask computed on the device
           ─► each group's rows packed on the device (one copy per group), then one copy of every row's samples
              and the durations to a reused pinned host block (`launch_rows`; `run_rows` keeps them on the device)

A row's frame bucket leaves at least `end_silence_frames` (rtvox.models.vocoder) of silence past the row's last
frame, so the vocoder sees what the eager step gives it there and the two agree at a chunk's end; the rest of the
bucket is beyond the vocoder's reach.

Grouping is what makes big mixed batches pay: a serving step's rows range from a few hundred to ~1 500 frames,
and one program over the whole batch pads every row to the longest row's bucket (3x the audio in the load
bench's later chunks); sorted rows split where a smaller frame bucket saves more padded work than a program
launch costs.

The encoder runs in fp32 (its hidden states set the rounding of durations: in bf16 they moved frames and cost log-
mel L1 0.23 against eager fp32 on rtvox-small) on weights kept in fp16 and upcast where used (exact: the shipped
weights are fp16; half the resident bytes), the frame-rate half in `dtype` (bf16 by default) with the vocoder's
iSTFT head in fp32 (rtvox.engines.modules.FP32_ISLANDS). Programs are torch.compile'd functions (`compile_mode`,
None = eager kernels, "dynamic" = one compile over symbolic shapes) captured as CUDA graphs on a GPU; on a CPU they
run uncaptured, which is what the CI tests exercise. Capture is lazy per bucket (`warmup` captures the profile's
grid up front).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.engines.cudagraph import capture_cuda_graph
from rtvox.engines.inductor import raise_recompile_limits
from rtvox.engines.modules import cast_module, store_weights_fp16
from rtvox.engines.quality import PipelineInputs
from rtvox.engines.shapes import AxisRange, ShapeProfile
from rtvox.errors import ModelError
from rtvox.models.bundle import ModelBundle
from rtvox.models.vocoder import end_silence_frames

Program = Callable[[], Any]


class _Captured:
    """fn() over static tensors, replayed as a CUDA graph (GPU) or called again (CPU)."""

    def __init__(self, fn: Program, device: torch.device, pool: Any, warmup: int = 2) -> None:
        self.graph: torch.cuda.CUDAGraph | None = None
        if device.type != "cuda":
            self.fn: Program | None = fn
            self.out = fn()
            return
        self.fn = None
        self.graph, self.out = capture_cuda_graph(fn, device, pool, warmup)

    def run(self) -> Any:
        if self.graph is not None:
            self.graph.replay()
        else:
            assert self.fn is not None
            self.out = self.fn()
        return self.out


# Inputs of a (batch, phoneme) bucket, in PipelineInputs' order, then each row's log-mel offset [batch, n_mels]
# (the emotion prior's spectral tilt plus a clone's timbre, read by the decode programs): the first two are padded
# along the phoneme axis with zeros; past the batch's own rows every
# input repeats its first row (a valid request).
_SEQUENCE_INPUTS = 2
_ALIGN = 64  # bytes: every input starts on an aligned offset of the staging block


class _Staging:
    """A bucket's inputs as one block of bytes: a host block (pinned on a GPU) and its device twin, whose slices
    are the programs' static inputs. A step writes the host block with numpy and moves it with one copy.

    Why not a torch call per input: on a serving thread every torch call hands the GIL over (PyTorch releases it
    around each op), and while the event loop is busy each handover costs ~0.1–0.5 ms, so a step's host time grew
    with its number of torch calls (benchmarks: launch phases 4–6x longer in the service's process than in an
    engine process of their own). Reuse is safe: a step reads its frame counts (a sync after the encode program,
    which is queued after this copy) before it returns, so the next write finds the last copy done."""

    def __init__(self, examples: Sequence[np.ndarray], batch: int, phonemes: int, device: torch.device) -> None:
        layout = []  # (offset, bytes, shape, dtype) per input
        total = 0
        for i, a in enumerate(examples):
            shape = (batch, phonemes) if i < _SEQUENCE_INPUTS else (batch, *a.shape[1:])
            nbytes = int(np.prod(shape)) * a.dtype.itemsize
            layout.append((total, nbytes, shape, torch.from_numpy(a[:0]).dtype))
            total += -(-nbytes // _ALIGN) * _ALIGN
        on_gpu = device.type == "cuda"
        self.host = torch.zeros(max(total, _ALIGN), dtype=torch.uint8, pin_memory=on_gpu)
        self.block = torch.zeros_like(self.host, device=device) if on_gpu else self.host
        self.host_arrays = [self.host[o : o + n].view(d).view(s).numpy() for o, n, s, d in layout]
        self.inputs = [self.block[o : o + n].view(d).view(s) for o, n, s, d in layout]

    def write(self, arrays: Sequence[np.ndarray]) -> None:
        """Fill the host block with one batch (numpy only) and queue its copy to the device."""
        for i, (dst, src) in enumerate(zip(self.host_arrays, arrays, strict=True)):
            rows = src.shape[0]
            if i < _SEQUENCE_INPUTS:
                n = src.shape[1]
                dst[:rows, :n] = src
                dst[:rows, n:] = 0
            else:
                dst[:rows] = src
            dst[rows:] = dst[:1]
        if self.block is not self.host:
            self.block.copy_(self.host, non_blocking=True)


class _HostBlocks:
    """Pinned host blocks for the steps' audio, reused once nothing refers to them any more.

    A step's rows leave as numpy views of one block (no host copy), and the chunks carrying them live until the
    clients have them; a fresh pinned allocation per step (the caching host allocator's blocks of ~30 MB, several
    alive at once) cost the serving thread milliseconds. Each block is kept as a tensor (the copy's target) and one
    numpy array over it, of which every view a step hands out is a view, so the array's reference count says
    whether a block is free. Reuse is ordered: a block's last copy was waited for (or, for a step that failed
    before its wait, is queued ahead of the next copy on the same stream)."""

    def __init__(self, pin: bool = True, max_blocks: int = 8) -> None:
        self.blocks: list[tuple[Tensor, np.ndarray]] = []
        self.pin = pin
        self.max_blocks = max_blocks  # page-locked memory is scarce: past this, steps copy their rows out

    def take(self, n: int) -> tuple[Tensor, np.ndarray, bool]:
        """A free block of at least `n` float32 values as (tensor, its numpy array, pooled); a new one, of n
        rounded up to 4 MiB, when none is free. With `max_blocks` in use (a caller holding on to many steps'
        chunks, e.g. a whole book in memory) the block is a one-off (pooled False): copy the rows out of it."""
        for i, block in enumerate(self.blocks):
            # references to the array: the pool's tuple, getrefcount's argument
            if sys.getrefcount(block[1]) <= 2:
                if block[0].numel() >= n:
                    return (*block, True)
                if len(self.blocks) >= self.max_blocks:  # too small and the pool is full: make it bigger
                    del self.blocks[i]
                    break
        size = -(-n // (1 << 20)) * (1 << 20)
        tensor = torch.empty(size, dtype=torch.float32, pin_memory=self.pin)
        if len(self.blocks) >= self.max_blocks:
            return tensor, tensor.numpy(), False
        self.blocks.append((tensor, tensor.numpy()))
        return (*self.blocks[-1], True)


class _EncodeSlot:
    """Staged static inputs and the captured encode program of one (batch, phoneme) bucket."""

    def __init__(self, staging: _Staging, program: _Captured) -> None:
        self.staging = staging
        self.program = program

    @property
    def offset(self) -> Tensor:
        """The rows' log-mel offset [batch, n_mels] on the device (staged beside the encode inputs)."""
        return self.staging.inputs[-1]


class _Encoded:
    """One batch after its encode program: encoder outputs (out of the graph pool), every row's frame count
    (read on the host), the bucket it ran in, and the step's (start, encoded) span events (None off a GPU)."""

    def __init__(
        self,
        slot: _EncodeSlot,
        hidden: Tensor,
        durations: Tensor,
        lengths: list[int],
        rows: int,
        events: tuple[Any, Any],
    ) -> None:
        self.slot, self.hidden, self.durations, self.lengths, self.rows = slot, hidden, durations, lengths, rows
        self.events = events


class _DecodeSlot:
    """Static inputs of the decode programs of one (batch, phoneme) bucket — encoder hidden states [batch,
    phonemes, D], durations [batch, phonemes], log-mel offset [batch, n_mels] — and those programs, one per frame
    bucket."""

    def __init__(self, hidden: Tensor, durations: Tensor, offset: Tensor) -> None:
        self.hidden = hidden
        self.durations = durations
        self.offset = offset
        self.decoders: dict[int, _Captured] = {}


# What one decode program launch costs beyond its rows' work, in padded row-frames: on an H200 a small decode +
# vocoder program takes ~1 ms, the time of ~2 000 row-frames at the saturated rate (benchmarks/probes).
GROUP_LAUNCH_ROW_FRAMES = 2048


class DeviceSpans:
    """Device time of the pipeline's steps, from CUDA events around its programs: the encode span (inputs in →
    encode done) and the decode span (first decode program → last), so a load test can tell a device-bound step
    (spans near the step's wall time) from a host-bound one (the device idles between and around them). A step's
    events are read at the next step or at `totals()`, never waited for: recording costs ~µs and no sync."""

    def __init__(self) -> None:
        self.steps = 0
        self.encode_s = 0.0
        self.decode_s = 0.0
        self.host: dict[str, float] = {}  # host seconds per phase of the steps (`host_phase`), summed
        self._pending: list[tuple[Any, Any, Any, Any]] = []

    def mark(self) -> Any:
        """An event recorded now on the current stream."""
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def add(self, start: Any, encoded: Any, decoding: Any, end: Any) -> None:
        self._pending.append((start, encoded, decoding, end))
        self.settle()

    def settle(self) -> None:
        """Fold in every finished step's spans (a step still on the device stays pending)."""
        while self._pending and self._pending[0][3].query():
            start, encoded, decoding, end = self._pending.pop(0)
            self.steps += 1
            self.encode_s += start.elapsed_time(encoded) / 1000.0
            self.decode_s += decoding.elapsed_time(end) / 1000.0

    def totals(self) -> dict[str, float]:
        self.settle()
        return {"steps": self.steps, "encode_s": self.encode_s, "decode_s": self.decode_s, **self.host}

    def host_phase(self, name: str, seconds: float) -> None:
        """Add host (wall) time of one phase of a step: prep, launch_encode (of which
        launch_encode_copies: the inputs' staging before the encode program's replay), wait_encode, launch_decode,
        launch_alloc (the packed device block), launch_tail (durations, the host block, its copy, the event), d2h,
        chunks — where the engine thread's time goes beside the device spans."""
        key = f"host_{name}_s"
        self.host[key] = self.host.get(key, 0.0) + seconds


def plan_decode_groups(
    lengths: list[int], batch: AxisRange, frames: AxisRange, launch_cost: int = GROUP_LAUNCH_ROW_FRAMES
) -> list[list[int]]:
    """Rows (indices into `lengths`, frame counts within `frames.max`) grouped for the decode programs: sorted by
    length, first one group per frame bucket, then neighbouring groups merged while that lowers the modelled
    cost, Σ over groups of (batch bucket × frame bucket + launch_cost) — the padded rows and frames a group's
    program computes, plus its launch. Groups come out shortest first; rows within a group keep length order."""
    order = sorted(range(len(lengths)), key=lambda r: lengths[r])
    groups: list[list[int]] = []
    for row in order:
        if groups and frames.bucket(lengths[groups[-1][-1]]) == frames.bucket(lengths[row]):
            groups[-1].append(row)
        else:
            groups.append([row])

    def cost(group: list[int]) -> int:
        return batch.bucket(len(group)) * frames.bucket(lengths[group[-1]]) + launch_cost

    while len(groups) > 1:
        gains = [cost(a) + cost(b) - cost(a + b) for a, b in itertools.pairwise(groups)]
        best = max(range(len(gains)), key=gains.__getitem__)
        if gains[best] <= 0:
            break
        groups[best : best + 2] = [groups[best] + groups[best + 1]]
    return groups


class ProfileExceededError(ValueError):
    """A batch does not fit the engine's shape profile (too many rows, phonemes or frames): the caller runs it on
    another path (the per-module engines) or splits it."""


class PipelineEngine:
    """encode → decode → vocoder of one bundle as captured programs per bucket. Call with PipelineInputs →
    (wav [B, S] fp32, zero past each row's length; frame lengths Long[B])."""

    backend = "graphs"

    def __init__(
        self,
        bundle: ModelBundle,
        device: torch.device | str,
        profile: ShapeProfile,
        *,
        dtype: torch.dtype = torch.bfloat16,
        compile_mode: str | None = "default",
        encode_weights_fp16: bool = True,
        encode_tf32: bool = False,
        group_launch_cost: int = GROUP_LAUNCH_ROW_FRAMES,
        fused_frames: bool = False,
    ) -> None:
        self.device = torch.device(device)
        # the encoder's fp32 matmuls on TF32 tensor cores (GPU): faster, but rounding may move a duration by a frame
        self.encode_tf32 = encode_tf32
        self.group_launch_cost = group_launch_cost  # plan_decode_groups' price of one more decode program
        self.profile = profile
        self.dtype = dtype
        self.compile_mode = compile_mode
        # Each program holds only the weights it runs: the encoder half in fp32, the frame-rate half in `dtype`.
        self.encoder: nn.Module = _without(cast_module(bundle.acoustic, self.device, torch.float32), _DECODER_PARTS)
        # fp32 arithmetic on weights resident in fp16 (exact for fp16-shipped weights): half the encoder's bytes
        saved = store_weights_fp16(self.encoder) if encode_weights_fp16 else 0
        self.decoder: nn.Module = _without(cast_module(bundle.acoustic, self.device, dtype), _ENCODER_PARTS)
        self.vocoder: nn.Module = cast_module(bundle.vocoder, self.device, dtype)
        fused: list[str] = []
        if fused_frames:  # the vocoder's ConvNeXt blocks as fused Triton kernels (triton_frames.fuse_frame_rate)
            from rtvox.engines.triton_frames import HAVE_TRITON, fuse_frame_rate

            if not HAVE_TRITON:
                raise ModelError("fused frame kernels need triton (a CUDA install of torch ships it)")
            self.vocoder, fused = fuse_frame_rate(self.decoder, self.vocoder)
        # silence frames a row's bucket must hold past its end (the chunk-end rule every path follows)
        self.end_frames = end_silence_frames(bundle.config.vocoder)
        self._slots: dict[tuple[int, int], _EncodeSlot] = {}
        # where the steps' audio lands (pinned on a GPU; on a CPU the same path, for the tests, with a plain copy)
        self._host_blocks = _HostBlocks(pin=self.device.type == "cuda")
        self._decode_slots: dict[tuple[int, int], _DecodeSlot] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.device.type == "cuda" else None
        self.spans: DeviceSpans | None = DeviceSpans() if self.device.type == "cuda" else None
        encode: Callable[..., tuple[Tensor, Tensor]] = self._encode
        decode: Callable[..., Tensor] = self._decode_vocode
        if compile_mode is not None:
            raise_recompile_limits()
            # "dynamic": one compile over symbolic shapes for every bucket (each bucket is still captured apart)
            dynamic = compile_mode == "dynamic"
            mode = "default" if dynamic else compile_mode
            encode = torch.compile(encode, mode=mode, fullgraph=True, dynamic=dynamic)
            decode = torch.compile(decode, mode=mode, fullgraph=True, dynamic=dynamic)
        self._encode_fn, self._decode_fn = encode, decode
        self.info: dict[str, Any] = {
            "compile_mode": compile_mode or "eager",
            "encode_dtype": "float32",
            "encode_tf32": encode_tf32,
            "fused_frames": fused,
            "encode_weights_fp16_mb": round(saved / 2**20, 1),
            "dtype": str(dtype).removeprefix("torch."),
            "cuda_graphs": self.device.type == "cuda",
        }

    # ------------------------------------------------------------------ the two programs
    def _encode(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        hidden, durations = self.encoder.encode(*inputs)  # type: ignore[operator]
        return hidden.to(self.dtype), durations

    def _decode_vocode(self, hidden: Tensor, durations: Tensor, offset: Tensor, n_frames: int) -> Tensor:
        lengths = durations.sum(1, keepdim=True)  # [B, 1]
        frame_mask = torch.arange(n_frames, device=hidden.device)[None, :] < lengths
        mel = self.decoder.decode_masked(hidden, durations, frame_mask)  # type: ignore[operator]
        # each row's log-mel offset (the emotion prior's tilt, rtvox.models.prosody.tilt_mel, plus a clone's timbre,
        # rtvox.runtime.timbre), on spoken frames only
        mel = mel + (offset[:, :, None] * frame_mask[:, None, :]).to(mel.dtype)
        wav: Tensor = self.vocoder(mel)
        return wav.float()

    # ------------------------------------------------------------------ buckets
    def _slot(self, batch: int, phonemes: int, example: Sequence[np.ndarray]) -> _EncodeSlot:
        """The (batch, phonemes) bucket; a new one is staged with `example` (the encode inputs and the offset as
        arrays; any valid batch: the capture runs the program on it) and its program captured."""
        key = (batch, phonemes)
        slot = self._slots.get(key)
        if slot is None:
            staging = _Staging(example, batch, phonemes, self.device)
            staging.write(example)
            static = staging.inputs[:-1]
            with torch.inference_mode(), _tf32_matmuls(self.encode_tf32):
                program = _Captured(lambda: self._encode_fn(*static), self.device, self._pool)
            slot = self._slots[key] = _EncodeSlot(staging, program)
        return slot

    def _decode_slot(self, batch: int, phonemes: int, hidden: Tensor, durations: Tensor) -> _DecodeSlot:
        """The (batch, phonemes) decode inputs; a new slot's buffers start as copies of `hidden`/`durations`'
        first rows (any valid encoder output: a capture runs the program on them)."""
        key = (batch, phonemes)
        slot = self._decode_slots.get(key)
        if slot is None:
            pick = torch.zeros(batch, dtype=torch.long, device=hidden.device)  # row 0 repeated: a valid row
            slot = _DecodeSlot(
                hidden.index_select(0, pick).clone(),
                durations.index_select(0, pick).clone(),
                torch.zeros(batch, N_MELS, device=self.device),
            )
            self._decode_slots[key] = slot
        return slot

    def _decoder(self, slot: _DecodeSlot, n_frames: int) -> _Captured:
        program = slot.decoders.get(n_frames)
        if program is None:
            # Reads the slot's static inputs where they are (fixed addresses once captured on a GPU).
            def run() -> Tensor:
                return self._decode_fn(slot.hidden, slot.durations, slot.offset, n_frames)

            with torch.inference_mode():
                program = _Captured(run, self.device, self._pool)
            slot.decoders[n_frames] = program
        return program

    def warmup(self, example: PipelineInputs) -> None:
        """Capture every (batch, phoneme, frame) bucket of the profile with `example`'s values."""
        arrays = _arrays(example, None)
        for batch in self.profile.batch.buckets:
            for phonemes in self.profile.phonemes.buckets:
                encode = self._slot(batch, phonemes, arrays)
                with torch.inference_mode():
                    hidden, durations = encode.program.run()
                    slot = self._decode_slot(batch, phonemes, hidden, durations)
                    for frames in self.profile.frames.buckets:
                        self._decoder(slot, frames)

    # ------------------------------------------------------------------ call
    def __call__(self, inputs: PipelineInputs) -> tuple[Tensor, Tensor]:
        wav, lengths, _ = self.run(inputs)
        return wav, lengths

    def run(self, inputs: PipelineInputs, offset: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(wav [B, S] fp32 zero past each row's length, frame lengths Long[B], durations Long[B, N]) of a batch:
        `run_rows` laid out as one padded tensor."""
        rows, lengths, durations = self.run_rows(inputs, offset)
        longest = max(lengths)
        wav = torch.zeros(len(rows), longest * HOP_LENGTH, device=self.device)
        for row, samples in enumerate(rows):
            wav[row, : samples.shape[0]] = samples
        return wav, torch.tensor(lengths), durations

    def run_rows(self, inputs: PipelineInputs, offset: Tensor | None = None) -> tuple[list[Tensor], list[int], Tensor]:
        """(each row's own samples [frames·hop] fp32 on the device, frame lengths, durations Long[B, N] on the
        device) of a batch; `offset` [B, n_mels]: each row's log-mel offset (the emotion
        prior's tilt plus a clone's timbre, rtvox.runtime.timbre.offset_row; None: 0). ProfileExceededError
        when the batch has more rows or phonemes than the profile's largest bucket (before any work) or a row more
        frames, with its end silence, than the largest frame bucket (after the encode program)."""
        with torch.inference_mode():
            encoded = self._run_encode(_arrays(inputs, offset))
            out: list[Tensor | None] = [None] * encoded.rows
            for group, wav in self._run_decodes(encoded):
                sizes = [encoded.lengths[row] * HOP_LENGTH for row in group]
                packed = torch.cat([wav[j, :n] for j, n in enumerate(sizes)])  # out of the pool, audio only
                for row, samples in zip(group, packed.split(sizes), strict=True):
                    out[row] = samples
            length = inputs.phonemes.shape[1]
            return [w for w in out if w is not None], encoded.lengths, encoded.durations[: encoded.rows, :length]

    def launch_rows(self, arrays: Sequence[np.ndarray]) -> Callable[[], tuple[list[np.ndarray], np.ndarray]]:
        """The serving step: `arrays` = the 8 encode inputs of PipelineInputs' order as numpy arrays (rows × their
        own phonemes, no padding) and the rows' log-mel offsets [B, n_mels] float32. Stages, encodes, reads the
        frame counts and queues every decode program with the copy of its rows' audio (and the durations) to host
        memory, then returns at once; the returned call waits for that copy → (each row's own samples fp32,
        durations int64 [B, N]), numpy views of one host block (any thread may call it). Few torch calls per step
        (one staging copy, a few per decode group), since each hands the GIL over on a serving thread (see
        `_Staging`). ProfileExceededError as `run_rows`."""
        rows, length = arrays[0].shape
        with torch.inference_mode():
            encoded = self._run_encode(arrays)
            lengths = encoded.lengths
            groups = self._plan(lengths)
            # one block: each group's rows cut at its longest row, then the durations (as float32: exact), packed
            # on the device group by group and copied to the host once at the end (a copy between decode programs
            # would hold the next program until it is done: one stream)
            spans_of = [len(group) * lengths[group[-1]] * HOP_LENGTH for group in groups]
            starts = np.cumsum([0, *spans_of])
            total = int(starts[-1]) + rows * length
            t0 = time.perf_counter()
            packed = torch.empty(total, dtype=torch.float32, device=self.device)
            allocated = time.perf_counter() - t0
            for k, (group, wav) in enumerate(self._run_decodes(encoded, groups)):
                width = lengths[group[-1]] * HOP_LENGTH
                packed[starts[k] : starts[k + 1]].view(len(group), width).copy_(wav[: len(group), :width])
            t1 = time.perf_counter()
            packed[int(starts[-1]) :].view(rows, length).copy_(encoded.durations[:rows, :length])
            block, flat, pooled = self._host_blocks.take(total)
            on_gpu = self.device.type == "cuda"
            block[:total].copy_(packed, non_blocking=on_gpu)
            copied: Any = None
            if on_gpu:
                copied = torch.cuda.Event()
                copied.record()
            if self.spans is not None:
                self.spans.host_phase("launch_tail", time.perf_counter() - t1)
                self.spans.host_phase("launch_alloc", allocated)

        def wait() -> tuple[list[np.ndarray], np.ndarray]:
            if copied is not None:
                copied.synchronize()
            out: list[np.ndarray] = [np.empty(0, np.float32)] * rows
            for k, group in enumerate(groups):
                width = lengths[group[-1]] * HOP_LENGTH
                part = flat[starts[k] : starts[k + 1]].reshape(len(group), width)
                for j, row in enumerate(group):
                    samples = part[j, : lengths[row] * HOP_LENGTH]
                    out[row] = samples if pooled else samples.copy()  # a one-off block is not kept alive
            durations = flat[int(starts[-1]) : total].reshape(rows, length).astype(np.int64)
            return out, durations

        return wait

    # ------------------------------------------------------------------ the two halves of a step
    def _run_encode(self, arrays: Sequence[np.ndarray]) -> _Encoded:
        """Stage a batch, run its encode program, read every row's frame count (the step's one host read)."""
        rows, length = arrays[0].shape
        batch = self._bucket(self.profile.batch, rows, "batch rows")
        phonemes = self._bucket(self.profile.phonemes, length, "phonemes")
        slot = self._slot(batch, phonemes, arrays)
        spans = self.spans
        started = spans.mark() if spans is not None else None
        t0 = time.perf_counter()
        slot.staging.write(arrays)
        t_copied = time.perf_counter()
        # Every program's intermediates share one graph pool, so memory a later-captured program reads or
        # returns may be scratch of one captured before it: outputs leave the pool before another program runs.
        hidden, durations = (t.clone() for t in slot.program.run())
        encoded = spans.mark() if spans is not None else None
        t1 = time.perf_counter()
        lengths = [int(n) for n in durations[:rows].sum(1).tolist()]  # the one host read
        t2 = time.perf_counter()
        if spans is not None:
            spans.host_phase("launch_encode", t1 - t0)
            spans.host_phase("launch_encode_copies", t_copied - t0)  # its part before the encode's replay
            spans.host_phase("wait_encode", t2 - t1)
        # the frames each row's program must hold: its own, then its end silence (the rest of a bucket is more)
        self._bucket(self.profile.frames, max(lengths) + self.end_frames, "frames (with the chunk-end silence)")
        return _Encoded(slot, hidden, durations, lengths, rows, (started, encoded))

    def _plan(self, lengths: list[int]) -> list[list[int]]:
        needed = [n + self.end_frames for n in lengths]
        return plan_decode_groups(needed, self.profile.batch, self.profile.frames, self.group_launch_cost)

    def _run_decodes(
        self, encoded: _Encoded, groups: list[list[int]] | None = None
    ) -> Iterator[tuple[list[int], Tensor]]:
        """Each decode group's rows (shortest first) and its program's audio [bucket rows, samples] — graph-pool
        memory the next program overwrites: use it before asking for the next group."""
        groups = self._plan(encoded.lengths) if groups is None else groups
        spans = self.spans
        t0 = time.perf_counter()
        decoding = spans.mark() if spans is not None else None
        picks = [group + [group[0]] * (self.profile.batch.bucket(len(group)) - len(group)) for group in groups]
        index = torch.from_numpy(np.concatenate(picks).astype(np.int64))  # every group's rows: one upload
        if self.device.type == "cuda":
            index = index.pin_memory().to(self.device, non_blocking=True)
        phonemes = encoded.hidden.shape[1]
        start = 0
        for group, pick in zip(groups, picks, strict=True):
            rows = index[start : start + len(pick)]
            start += len(pick)
            dec = self._decode_slot(len(pick), phonemes, encoded.hidden, encoded.durations)
            torch.index_select(encoded.hidden, 0, rows, out=dec.hidden)
            torch.index_select(encoded.durations, 0, rows, out=dec.durations)
            torch.index_select(encoded.slot.offset, 0, rows, out=dec.offset)
            needed = encoded.lengths[group[-1]] + self.end_frames
            yield group, self._decoder(dec, self.profile.frames.bucket(needed)).run()
        if spans is not None:
            started, done = encoded.events
            spans.add(started, done, decoding, spans.mark())
            spans.host_phase("launch_decode", time.perf_counter() - t0)  # with the caller's work between groups

    @staticmethod
    def _bucket(axis: AxisRange, n: int, name: str) -> int:
        if n > axis.max:
            raise ProfileExceededError(f"{n} {name} exceed the pipeline's shape profile (max {axis.max})")
        return axis.bucket(n, name)


def _arrays(inputs: PipelineInputs, offset: Tensor | None) -> list[np.ndarray]:
    """PipelineInputs (any device) and an offset [B, n_mels] (None: 0) as the host arrays `launch_rows` takes."""
    arrays = [t.detach().cpu().numpy() for t in inputs.tensors("cpu")]
    rows = arrays[0].shape[0]
    zeros = np.zeros((rows, N_MELS), np.float32)
    arrays.append(zeros if offset is None else offset.detach().float().cpu().numpy().reshape(rows, N_MELS))
    return arrays


@contextlib.contextmanager
def _tf32_matmuls(on: bool) -> Iterator[None]:
    """cuBLAS fp32 matmuls on TF32 tensor cores while a program is captured (its kernels are chosen then)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on or before
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


# AcousticModel submodules each half does not run (encode: embed → encoder → cond_proj → variance;
# decode_masked: decoder → mel_out → postnet).
_DECODER_PARTS = ("decoder", "mel_out", "postnet")
_ENCODER_PARTS = ("embed", "encoder", "cond_proj", "variance")


def _without(model: nn.Module, parts: tuple[str, ...]) -> nn.Module:
    """`model` (an engine's own copy) with the named submodules dropped, so their weights leave the device."""
    for name in parts:
        if getattr(model, name, None) is not None:
            delattr(model, name)
            setattr(model, name, None)
    return model
