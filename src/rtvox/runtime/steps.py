"""The executor-side data of a request and the batched chunk step, shared by `Synthesizer.stream` and the service.

A request is prepared once (frontend → phoneme ids, condition vector, per-chunk frame targets), then each chunk
runs through one batched step: acoustic encode + decode for every chunk of the batch in one call each (rows padded
to the longest, per-row masks), then the vocoder over overlapping mel windows (`streaming.vocode_batched`), so a
batched row's audio equals that chunk run alone. Every chunk is vocoded followed by `end_frames` of silence
(rtvox.models.vocoder.end_silence_frames), as the captured pipeline does, so both paths agree at a chunk's end.
Owns no queues; the scheduler decides which chunks run together.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rtvox.constants import HOP_LENGTH
from rtvox.engines import Engine
from rtvox.engines.pipeline import DeviceSpans, PipelineEngine, ProfileExceededError
from rtvox.models.prosody import IDENTITY_ROW, ProsodyRow, tilt_mel
from rtvox.runtime.preempt import preemption_point
from rtvox.runtime.streaming import DEFAULT_BATCH_WINDOW_FRAMES, DEFAULT_MAX_ROWS, vocode_batched
from rtvox.runtime.timbre import offset_row
from rtvox.runtime.types import AudioChunk, SynthesisRequest

# Rough speaking rate used to bound a request's audio length before the model has run (limits only): a Mandarin
# syllable is ~2 phonemes in ~0.2 s, English ~12 phonemes per second; 0.12 s errs long, so limits err strict.
SECONDS_PER_PHONEME_ESTIMATE = 0.12


@dataclass(frozen=True)
class PreparedChunk:
    """One chunk ready for the acoustic model."""

    text: str  # normalized text the chunk speaks
    phonemes: tuple[str, ...]  # its phonemes, boundary tokens included
    ids: tuple[int, ...]  # vocabulary ids the model sees: the lead-in's `lead` ids, then the phonemes'
    target_frames: int  # exact frame count the model renders, lead-in included (0 = the model's natural length)
    # where each id's phoneme sits in `phonemes` (the model's skip_symbols are left out and take 0 frames);
    # empty: one id per phoneme
    positions: tuple[int, ...] = ()
    # the model's natural-rate factor for the chunk's languages (ModelConfig.chunk_rate), times the request's speed
    rate: float = 1.0
    # ids of a throw-away lead-in at the front of `ids` (ModelConfig.lead_in): their frames are cut off the audio
    lead: int = 0
    # with a lead-in and a target: the exact frame count of the audio kept (the last frames rendered); 0: none
    content_frames: int = 0

    def phoneme_durations(self, durations: Sequence[int]) -> tuple[int, ...]:
        """Frames per phoneme of `phonemes` from the model's frames per id (lead-in already cut)."""
        if not self.positions:
            return tuple(int(d) for d in durations)
        out = [0] * len(self.phonemes)
        for position, d in zip(self.positions, durations, strict=True):
            out[position] = int(d)
        return tuple(out)

    def cut_lead(self, wav: np.ndarray, frames_per_id: Sequence[int]) -> tuple[np.ndarray, list[int]]:
        """(audio, frames per phoneme id) of the chunk itself from what the model rendered for `ids`.

        Without a target the lead-in's frames go; with one (`content_frames`), the first frames past it, so the
        chunk is exactly its target long. The frames gained or lost are the first phoneme's (then the next's), so
        the durations still sum to the audio's frames."""
        frames = [int(d) for d in frames_per_id]
        if not self.lead:
            return wav, frames
        lead_frames, total = sum(frames[: self.lead]), sum(frames)
        cut = min(max(total - self.content_frames, 0), total) if self.content_frames else lead_frames
        out = frames[self.lead :]
        extra = lead_frames - cut  # > 0: frames of the lead-in's pause kept; < 0: the chunk's first frames cut
        if extra > 0 and out:
            out[0] += extra
        for i in range(len(out)):
            if extra >= 0:
                break
            take = min(out[i], -extra)
            out[i] -= take
            extra += take
        return wav[cut * HOP_LENGTH :], out


@dataclass(frozen=True)
class PreparedRequest:
    """A request after the frontend and conditioning: everything the chunk steps need, nothing mutable."""

    request: SynthesisRequest  # the settings as given (speed, pitch and energy scales are read per step)
    normalized: str  # the whole normalized text
    chunks: tuple[PreparedChunk, ...]  # in stream order, at least one
    cond: torch.Tensor  # [1, C] speaker ⊕ α·emotion, on the preparing synthesizer's cond_device
    # the emotion prosody prior's row for this request (IDENTITY_ROW: none, neutral, or an emotion reference clip)
    prosody: ProsodyRow = IDENTITY_ROW
    tilt: float = 0.0  # the prior's spectral tilt, added to each decoded mel before the vocoder
    # a clone's timbre offset [n_mels] (rtvox.runtime.timbre), added there too; None for none
    timbre: np.ndarray | None = None
    warnings: tuple[str, ...] = ()  # the frontend's: what of the text is not spoken, and why

    @property
    def phoneme_count(self) -> int:
        """The text's phoneme ids (lead-ins are not the request's: limits count without them)."""
        return sum(len(c.ids) - c.lead for c in self.chunks)

    def estimated_seconds(self) -> float:
        """Audio length for limit checks: exact with a target duration, else a deliberately long estimate."""
        if self.request.duration is not None:
            return self.request.duration
        return self.phoneme_count * SECONDS_PER_PHONEME_ESTIMATE / self.request.speed


@dataclass(frozen=True)
class ChunkJob:
    """One chunk of one prepared request to run in a batched step."""

    prepared: PreparedRequest
    index: int  # position of the chunk in prepared.chunks


# (ids, cond [1, C], request, target frames, prosody row, the chunk's rate factor)
EncodeRow = tuple[Sequence[int], torch.Tensor, SynthesisRequest, int, ProsodyRow, float]


def encode_row(job: ChunkJob) -> EncodeRow:
    """The acoustic_encode row of one job's chunk."""
    chunk = job.prepared.chunks[job.index]
    return chunk.ids, job.prepared.cond, job.prepared.request, chunk.target_frames, job.prepared.prosody, chunk.rate


def encode_arrays(rows: Sequence[EncodeRow]) -> list[np.ndarray]:
    """(ids, cond[1, C], request, target frames, prosody row, rate) per row -> the 8 inputs of acoustic_encode as
    host arrays, padded to the longest (numpy only: the serving step's host side makes no torch call here). A
    row's speed is the request's times the chunk's rate factor.

    phonemes int64[B, N] (0 = pad id), mask bool[B, N], cond float32[B, C], speed [B], target int64[B], pitch [B],
    energy [B], prosody [B, 4].
    """
    phonemes, mask, *rest = _arrays_but_cond(rows)
    cond = np.concatenate([_host_array(r[1]) for r in rows]).astype(np.float32, copy=False)
    return [phonemes, mask, cond, *rest]


def encode_inputs(rows: Sequence[EncodeRow], device: torch.device) -> tuple[torch.Tensor, ...]:
    """`encode_arrays` as tensors on `device`; the conds are joined where they live (one copy, not one per row,
    when they are on another device than the host)."""
    phonemes, mask, *rest = (torch.from_numpy(a).to(device) for a in _arrays_but_cond(rows))
    cond = torch.cat([r[1] for r in rows]).to(device)
    return (phonemes, mask, cond, *rest)


def _arrays_but_cond(rows: Sequence[EncodeRow]) -> list[np.ndarray]:
    """encode_arrays' phonemes, mask, speed, target, pitch, energy and prosody."""
    lengths = np.fromiter((len(r[0]) for r in rows), np.int64, count=len(rows))
    mask = np.arange(int(lengths.max()))[None, :] < lengths[:, None]
    phonemes = np.zeros(mask.shape, np.int64)
    # row-major order of the mask's True cells is the rows' ids one after another: one fill, no per-row arrays
    phonemes[mask] = np.fromiter(itertools.chain.from_iterable(r[0] for r in rows), np.int64, int(lengths.sum()))
    speed = np.array([r[2].speed * r[5] for r in rows], np.float32)
    target = np.array([r[3] for r in rows], np.int64)
    pitch = np.array([r[2].pitch_scale for r in rows], np.float32)
    energy = np.array([r[2].energy_scale for r in rows], np.float32)
    prosody = np.array([r[4] for r in rows], np.float32).reshape(len(rows), -1)  # [B, 4]
    return [phonemes, mask, speed, target, pitch, energy, prosody]


def _host_array(t: torch.Tensor) -> np.ndarray:
    # no torch op on the usual path (a CPU tensor without grad): each op hands the GIL over on a serving thread
    if t.device.type == "cpu" and not t.requires_grad and t.dtype == torch.float32:
        return t.numpy()
    return t.detach().float().cpu().numpy()  # another device or dtype (bf16 has no numpy type)


def allocate_frames(natural: list[int], total: int) -> list[int]:
    """Split `total` frames over chunks in proportion to their natural lengths (largest remainder, exact sum)."""
    weights = np.asarray(natural, dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    exact = weights / weights.sum() * total
    frames = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - frames), kind="stable")
    frames[order[: total - int(frames.sum())]] += 1
    # a chunk given 0 frames would be read as "no target" (its natural length): one frame each, from the longest
    while total >= len(frames) and (frames == 0).any():
        frames[int(np.argmax(frames))] -= 1
        frames[int(np.argmin(frames))] += 1
    return [int(f) for f in frames]


def natural_durations(
    engines: Mapping[str, Engine],
    chunks: Sequence[Sequence[int]],
    cond: torch.Tensor,
    request: SynthesisRequest,
    prosody: ProsodyRow = IDENTITY_ROW,
    *,
    device: torch.device | None = None,
    rates: Sequence[float] | None = None,
) -> list[list[int]]:
    """Each chunk's frames per id with no target, from one batched acoustic_encode call on `device` (default:
    cond's); `rates`: each chunk's rate factor (default 1)."""
    factors = [1.0] * len(chunks) if rates is None else rates
    rows = [(ids, cond, request, 0, prosody, rate) for ids, rate in zip(chunks, factors, strict=True)]
    inputs = encode_inputs(rows, device or cond.device)
    _, durations = engines["acoustic_encode"](*inputs)[:2]
    table = durations.tolist()
    return [[int(d) for d in row[: len(ids)]] for row, ids in zip(table, chunks, strict=True)]


def shape_mel(mel: torch.Tensor, prepared: PreparedRequest) -> torch.Tensor:
    """A row's spoken mel [n_mels, T] with its request's spectral tilt and clone timbre added (unchanged when
    neither is set)."""
    out = tilt_mel(mel, prepared.tilt)
    if prepared.timbre is not None:
        out = out + torch.as_tensor(prepared.timbre, dtype=mel.dtype, device=mel.device)[:, None]
    return out


def run_chunk_step(
    engines: Mapping[str, Engine],
    jobs: Sequence[ChunkJob],
    device: torch.device,
    *,
    context_frames: int,
    end_frames: int,
    window_frames: int = DEFAULT_BATCH_WINDOW_FRAMES,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> list[AudioChunk]:
    """Run one chunk of each job through the engines as one batch; one AudioChunk per job, in order.

    Pure with respect to the jobs (nothing is mutated), so a failed step can be re-run elsewhere as it is.
    """
    if not jobs:
        return []
    hidden, durations = engines["acoustic_encode"](*encode_inputs([encode_row(job) for job in jobs], device))[:2]
    preemption_point()  # between stages (and vocoder windows) urgent work may run first: rtvox.runtime.preempt
    (mel,) = engines["acoustic_decode"](hidden, durations)  # [B, 80, T_max], silence past each row's end
    preemption_point()
    lengths = durations.sum(1).tolist()
    mels = [
        shape_mel(mel[row, :, : int(t)], job.prepared) for row, (t, job) in enumerate(zip(lengths, jobs, strict=True))
    ]
    audio = vocode_batched(
        engines["vocoder"],
        mels,
        end_frames=end_frames,
        context_frames=context_frames,
        window_frames=window_frames,
        max_rows=max_rows,
    )
    out = []
    for row, job in enumerate(jobs):
        wav = audio[row]
        assert wav.shape[0] == int(lengths[row]) * HOP_LENGTH
        out.append(audio_chunk(job, wav, durations[row, : len(job.prepared.chunks[job.index].ids)].tolist()))
    return out


def run_pipeline_step(
    pipeline: PipelineEngine,
    engines: Mapping[str, Engine],
    jobs: Sequence[ChunkJob],
    device: torch.device,
    *,
    context_frames: int,
    end_frames: int,
) -> list[AudioChunk]:
    """`run_chunk_step` on the captured pipeline (rtvox.engines.pipeline: encode, decode and vocoder as CUDA
    graphs per shape bucket, the whole chunk vocoded at once): batches past the profile's row count are split,
    and a group whose longest row is past its frame buckets runs on the per-module `engines` instead."""
    return launch_pipeline_step(pipeline, engines, jobs, device, context_frames=context_frames, end_frames=end_frames)()


def launch_pipeline_step(
    pipeline: PipelineEngine,
    engines: Mapping[str, Engine],
    jobs: Sequence[ChunkJob],
    device: torch.device,
    *,
    context_frames: int,
    end_frames: int,
) -> Callable[[], list[AudioChunk]]:
    """`run_pipeline_step` in two halves: this call prepares the rows, runs the encode program, reads the frame
    counts and launches the decode programs and the copy of their audio to the host; the returned `finish` waits
    for that copy and builds the chunks. On a GPU the device is still decoding when this returns, so the caller's
    thread can launch the next step meanwhile and wait in `finish` elsewhere (the executor's split steps)."""
    pending: list[Callable[[], list[AudioChunk]]] = []
    size = pipeline.profile.batch.max
    spans = pipeline.spans
    for start in range(0, len(jobs), size):
        group = jobs[start : start + size]
        t0 = time.perf_counter()
        arrays = encode_arrays([encode_row(job) for job in group])
        arrays.append(np.stack([offset_row(job.prepared.tilt, job.prepared.timbre) for job in group]))
        t1 = time.perf_counter()
        try:
            wait = pipeline.launch_rows(arrays)
        except ProfileExceededError:
            step = run_chunk_step(engines, group, device, context_frames=context_frames, end_frames=end_frames)
            pending.append(ready(step))
            continue
        if spans is not None:
            spans.host_phase("prep", t1 - t0)
        pending.append(_finisher(group, wait, spans))

    def finish() -> list[AudioChunk]:
        return [chunk for part in pending for chunk in part()]

    return finish


def ready(chunks: list[AudioChunk]) -> Callable[[], list[AudioChunk]]:
    """A finished step in the shape of a launched one."""
    return lambda: chunks


def _finisher(
    group: Sequence[ChunkJob], copy: Callable[[], tuple[list[np.ndarray], np.ndarray]], spans: DeviceSpans | None
) -> Callable[[], list[AudioChunk]]:
    def finish() -> list[AudioChunk]:
        t0 = time.perf_counter()
        samples, per_id = copy()
        t1 = time.perf_counter()
        out = []
        for row, job in enumerate(group):
            n_ids = len(job.prepared.chunks[job.index].ids)
            out.append(audio_chunk(job, samples[row], per_id[row, :n_ids].tolist()))
        if spans is not None:  # the host side of the step beside its device spans (launch_rows adds its own phases)
            spans.host_phase("d2h", t1 - t0)
            spans.host_phase("chunks", time.perf_counter() - t1)
        return out

    return finish


def audio_chunk(job: ChunkJob, wav: np.ndarray, frames_per_id: Sequence[int]) -> AudioChunk:
    """The AudioChunk of one job's vocoded chunk (either family's step): `wav` and `frames_per_id` as rendered
    for the chunk's ids, its lead-in cut off here."""
    chunk = job.prepared.chunks[job.index]
    wav, frames = chunk.cut_lead(wav, frames_per_id)
    return AudioChunk(
        index=job.index,
        audio=np.ascontiguousarray(wav, dtype=np.float32),
        text=chunk.text,
        is_last=job.index == len(job.prepared.chunks) - 1,
        phonemes=chunk.phonemes,
        durations=chunk.phoneme_durations(frames),
        warnings=job.prepared.warnings if job.index == 0 else (),
    )
