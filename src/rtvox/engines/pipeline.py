"""The whole acoustic → vocoder chain as two captured programs per shape bucket (the GPU fast path).

Per-module engines pay, on every call, a graph launch, the copy of their inputs into static buffers, the cut
of their outputs and a host read of the frame count between encode and decode; on an H200 that host side was
half of the compiled pipeline's 3.4 ms for a 10-s utterance (benchmarks/probes/gpu_pipeline_probe.py). Here:

    inputs ─pad into static buffers─► [encode program]  (batch, phoneme) bucket
           ─one host read: every row's frame count─► rows grouped by length (`plan_decode_groups`)
           ─► per group: its rows' encoder outputs gathered into the static inputs of a
              [decode + vocoder program]  (batch, phoneme, frame) bucket, the frame mask computed on the device
           ─► each row's own samples, copied out of the programs' outputs (one device copy per group)

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

import itertools
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.constants import HOP_LENGTH
from rtvox.engines.cudagraph import capture_cuda_graph
from rtvox.engines.inductor import raise_recompile_limits
from rtvox.engines.modules import cast_module, store_weights_fp16
from rtvox.engines.quality import PipelineInputs
from rtvox.engines.shapes import AxisRange, ShapeProfile
from rtvox.models.bundle import ModelBundle
from rtvox.models.prosody import tilt_ramp
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


class _EncodeSlot:
    """Static inputs and the captured encode program of one (batch, phoneme) bucket."""

    def __init__(self, inputs: list[Tensor], program: _Captured) -> None:
        self.inputs = inputs
        self.program = program


class _DecodeSlot:
    """Static inputs of the decode programs of one (batch, phoneme) bucket — encoder hidden states [batch,
    phonemes, D], durations [batch, phonemes], spectral tilt [batch] — and those programs, one per frame bucket."""

    def __init__(self, hidden: Tensor, durations: Tensor, tilt: Tensor) -> None:
        self.hidden = hidden
        self.durations = durations
        self.tilt = tilt
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
        launch_encode_copies: the inputs' copies before the encode program's replay), wait_encode, launch_decode,
        d2h, chunks — where the engine thread's time goes beside the device spans."""
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
        group_launch_cost: int = GROUP_LAUNCH_ROW_FRAMES,
    ) -> None:
        self.device = torch.device(device)
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
        # silence frames a row's bucket must hold past its end (the chunk-end rule every path follows)
        self.end_frames = end_silence_frames(bundle.config.vocoder)
        self._slots: dict[tuple[int, int], _EncodeSlot] = {}
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
            "encode_weights_fp16_mb": round(saved / 2**20, 1),
            "dtype": str(dtype).removeprefix("torch."),
            "cuda_graphs": self.device.type == "cuda",
        }

    # ------------------------------------------------------------------ the two programs
    def _encode(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        hidden, durations = self.encoder.encode(*inputs)  # type: ignore[operator]
        return hidden.to(self.dtype), durations

    def _decode_vocode(self, hidden: Tensor, durations: Tensor, tilt: Tensor, n_frames: int) -> Tensor:
        lengths = durations.sum(1, keepdim=True)  # [B, 1]
        frame_mask = torch.arange(n_frames, device=hidden.device)[None, :] < lengths
        mel = self.decoder.decode_masked(hidden, durations, frame_mask)  # type: ignore[operator]
        # the emotion prior's spectral tilt (rtvox.models.prosody.tilt_mel), per row, on spoken frames only
        ramp = tilt_ramp(mel.shape[1], mel.device)
        mel = mel + (tilt[:, None, None] * ramp[None, :, None] * frame_mask[:, None, :]).to(mel.dtype)
        wav: Tensor = self.vocoder(mel)
        return wav.float()

    # ------------------------------------------------------------------ buckets
    def _slot(self, batch: int, phonemes: int, example: tuple[Tensor, ...]) -> _EncodeSlot:
        key = (batch, phonemes)
        slot = self._slots.get(key)
        if slot is None:
            static = [_pad(t, batch, phonemes if i < 2 else None).to(self.device) for i, t in enumerate(example)]
            static = [t.clone() for t in static]  # buffers of their own, whatever `example` shares
            with torch.inference_mode():
                program = _Captured(lambda: self._encode_fn(*static), self.device, self._pool)
            slot = self._slots[key] = _EncodeSlot(static, program)
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
                torch.zeros(batch, device=self.device),
            )
            self._decode_slots[key] = slot
        return slot

    def _decoder(self, slot: _DecodeSlot, n_frames: int) -> _Captured:
        program = slot.decoders.get(n_frames)
        if program is None:
            # Reads the slot's static inputs where they are (fixed addresses once captured on a GPU).
            def run() -> Tensor:
                return self._decode_fn(slot.hidden, slot.durations, slot.tilt, n_frames)

            with torch.inference_mode():
                program = _Captured(run, self.device, self._pool)
            slot.decoders[n_frames] = program
        return program

    def warmup(self, example: PipelineInputs) -> None:
        """Capture every (batch, phoneme, frame) bucket of the profile with `example`'s values."""
        tensors = example.tensors("cpu")
        for batch in self.profile.batch.buckets:
            for phonemes in self.profile.phonemes.buckets:
                encode = self._slot(batch, phonemes, tensors)
                with torch.inference_mode():
                    hidden, durations = encode.program.run()
                    slot = self._decode_slot(batch, phonemes, hidden, durations)
                    for frames in self.profile.frames.buckets:
                        self._decoder(slot, frames)

    # ------------------------------------------------------------------ call
    def __call__(self, inputs: PipelineInputs) -> tuple[Tensor, Tensor]:
        wav, lengths, _ = self.run(inputs)
        return wav, lengths

    def run(self, inputs: PipelineInputs, tilt: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(wav [B, S] fp32 zero past each row's length, frame lengths Long[B], durations Long[B, N]) of a batch:
        `run_rows` laid out as one padded tensor."""
        rows, lengths, durations = self.run_rows(inputs, tilt)
        longest = max(lengths)
        wav = torch.zeros(len(rows), longest * HOP_LENGTH, device=self.device)
        for row, samples in enumerate(rows):
            wav[row, : samples.shape[0]] = samples
        return wav, torch.tensor(lengths), durations

    def run_rows(self, inputs: PipelineInputs, tilt: Tensor | None = None) -> tuple[list[Tensor], list[int], Tensor]:
        """(each row's own samples [frames·hop] fp32 on the device, frame lengths, durations Long[B, N] on the
        device) of a batch; `tilt` [B]: the emotion prior's spectral tilt per row (None: 0). ProfileExceededError
        when the batch has more rows or phonemes than the profile's largest bucket (before any work) or a row more
        frames, with its end silence, than the largest frame bucket (after the encode program)."""
        tensors = inputs.tensors("cpu")  # padded on the host: one copy per input into its static buffer
        rows, length = tensors[0].shape
        batch = self._bucket(self.profile.batch, rows, "batch rows")
        phonemes = self._bucket(self.profile.phonemes, length, "phonemes")
        slot = self._slot(batch, phonemes, tensors)
        spans = self.spans
        started = spans.mark() if spans is not None else None
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i, (dst, src) in enumerate(zip(slot.inputs, tensors, strict=True)):
                dst.copy_(self._staged(_pad(src, batch, phonemes if i < 2 else None)), non_blocking=True)
            t_copied = time.perf_counter()
            # Every program's intermediates share one graph pool, so memory a later-captured program reads or
            # returns may be scratch of one captured before it: outputs leave the pool before another program runs.
            hidden, durations = (t.clone() for t in slot.program.run())
            encoded = spans.mark() if spans is not None else None
            t1 = time.perf_counter()
            lengths = [int(n) for n in durations[:rows].sum(1).tolist()]  # the one host read
            decoding = spans.mark() if spans is not None else None
            t2 = time.perf_counter()
            # the frames each row's program must hold: its own, then its end silence (the rest of a bucket is more)
            needed = [n + self.end_frames for n in lengths]
            self._bucket(self.profile.frames, max(needed), "frames (with the chunk-end silence)")
            tilts = torch.zeros(rows) if tilt is None else tilt.float().cpu()
            out: list[Tensor | None] = [None] * rows
            groups = plan_decode_groups(needed, self.profile.batch, self.profile.frames, self.group_launch_cost)
            for group in groups:
                size = self.profile.batch.bucket(len(group))
                pick = group + [group[0]] * (size - len(group))  # padding rows repeat a valid one
                dec = self._decode_slot(size, phonemes, hidden, durations)
                index = self._staged(torch.tensor(pick)).to(self.device, non_blocking=True)
                torch.index_select(hidden, 0, index, out=dec.hidden)
                torch.index_select(durations, 0, index, out=dec.durations)
                dec.tilt.copy_(self._staged(tilts[pick]), non_blocking=True)
                wav = self._decoder(dec, self.profile.frames.bucket(needed[group[-1]])).run()
                sizes = [lengths[row] * HOP_LENGTH for row in group]
                packed = torch.cat([wav[j, :n] for j, n in enumerate(sizes)])  # out of the pool, audio only
                for row, samples in zip(group, packed.split(sizes), strict=True):
                    out[row] = samples
            if spans is not None:
                spans.add(started, encoded, decoding, spans.mark())
                spans.host_phase("launch_encode", t1 - t0)
                spans.host_phase("launch_encode_copies", t_copied - t0)  # its part before the encode's replay
                spans.host_phase("wait_encode", t2 - t1)
                spans.host_phase("launch_decode", time.perf_counter() - t2)
            return [w for w in out if w is not None], lengths, durations[:rows, :length]

    def _staged(self, t: Tensor) -> Tensor:
        """A host tensor bound for the GPU, in pinned memory: a copy from pageable memory first waits for
        everything queued on the stream (CUDA's rule for pageable host-to-device copies), which would hold the
        host until the previous step's decode ends; from pinned memory the copy just joins the queue."""
        return t.pin_memory() if self.device.type == "cuda" else t

    @staticmethod
    def _bucket(axis: AxisRange, n: int, name: str) -> int:
        if n > axis.max:
            raise ProfileExceededError(f"{n} {name} exceed the pipeline's shape profile (max {axis.max})")
        return axis.bucket(n, name)


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


def _pad(t: Tensor, batch: int, length: int | None) -> Tensor:
    """Rows padded to `batch` by repeating the first (a valid request), the phoneme axis to `length` with
    zeros (padding id, mask False)."""
    if length is not None and t.shape[1] < length:
        t = F.pad(t, (0, length - t.shape[1]))
    if t.shape[0] < batch:
        t = torch.cat([t, t[:1].expand(batch - t.shape[0], *t.shape[1:])], 0)
    return t
