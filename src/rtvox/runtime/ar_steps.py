"""The autoregressive family's side of the Synthesizer: what it cannot do, and its batched chunk step (the default
family's is rtvox.runtime.steps.run_chunk_step; both take the same ChunkJobs and return the same AudioChunks).

One step: every job becomes one ARRequest (the chunk's model ids, the request's condition, an exact token count
when the request has a target duration, else a free length with a generous cap); all of them go through one
`ARDecodeEngine.generate` (continuous batching: rows join and leave the decode batch at step boundaries); the codec
turns each row's codes into a mel in the row's voice; the mel is resampled to its exact length (the chunk's target,
or the generated length divided by `speed`: the GPT has no duration predictor to scale); `vocode_batched` vocodes
all rows over overlapping windows, each followed by the chunk-end silence every path uses
(rtvox.models.vocoder.end_silence_frames). Sampling noise is a counter hash of (seed, step, token), so a row's
audio does not depend on what it is batched with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from rtvox.constants import FRAMES_PER_SECOND, SPEAKER_EMBED_DIM
from rtvox.errors import InputError
from rtvox.models.ar_bundle import ARBundle
from rtvox.models.codec import pointer_track, split_tokens
from rtvox.models.sampling import SamplingParams
from rtvox.models.vocoder import end_silence_frames
from rtvox.runtime.ar import ARDecodeEngine, ARRequest
from rtvox.runtime.steps import (
    SECONDS_PER_PHONEME_ESTIMATE,
    ChunkJob,
    PreparedRequest,
    allocate_frames,
    audio_chunk,
)
from rtvox.runtime.streaming import vocode_batched
from rtvox.runtime.types import AudioChunk

BLOCK_SIZE = 16  # tokens per KV-cache block
MAX_BATCH = 64  # sequences decoded together; a step with more jobs admits the rest as rows finish
# KV-cache rows, each sized for the model's whole context (max_positions), so any admitted request's budget fits:
# a full decode batch on CUDA; fewer on the CPU, where memory is tight (a base-preset fp32 row is ~150 MB) and two
# cores gain little from width; requests beyond the cache wait in the engine's queue for blocks to free.
CACHE_ROWS_CUDA = MAX_BATCH
CACHE_ROWS_CPU = 8
FREE_LENGTH_MARGIN = 2.0  # free length's cap: this many times the (already long) per-phoneme time estimate
DEFAULT_SEED = 0  # a request without a seed: the same text gives the same audio, as in the default family


def check_request(bundle: ARBundle, prepared: PreparedRequest) -> None:
    """InputError (HTTP 400) for what the AR family cannot honour: pitch and energy scales (it predicts no
    contours to scale) and chunks whose prompt + codes exceed the model's context."""
    request = prepared.request
    for name in ("pitch_scale", "energy_scale"):
        if getattr(request, name) != 1.0:
            raise InputError(
                f"{name} is not supported by this model (autoregressive family: it predicts no pitch or energy "
                f"contour to scale); leave {name} at 1 or use a default-family model",
                param=name,
            )
    for index in range(len(prepared.chunks)):
        ar_request(bundle, ChunkJob(prepared, index), request_id=str(index))


def ar_request(bundle: ARBundle, job: ChunkJob, request_id: str) -> ARRequest:
    """The decode request of one chunk: an exact token count for a target duration, else a capped free length."""
    chunk, request = job.prepared.chunks[job.index], job.prepared.request
    config, downsample = bundle.config.ar, bundle.config.codec.downsample
    room = config.max_positions - (len(chunk.ids) + 3)  # positions left after [cond, count, phonemes, bos]
    estimate = len(chunk.ids) * SECONDS_PER_PHONEME_ESTIMATE * FREE_LENGTH_MARGIN * FRAMES_PER_SECOND / downsample
    out = ARRequest(
        request_id,
        chunk.ids,
        job.prepared.cond[0].tolist(),
        token_count=max(1, round(chunk.target_frames / downsample)) if request.duration is not None else None,
        max_new_tokens=max(1, min(room, math.ceil(estimate))),
        sampling=SamplingParams(seed=request.seed if request.seed is not None else DEFAULT_SEED),
    )
    if out.prompt_len + out.budget > config.max_positions:
        raise InputError(
            f"chunk {job.index} needs {out.prompt_len} prompt and {out.budget} code positions, over this model's "
            f"{config.max_positions}; ask for a shorter duration or send less text per request",
            param="duration" if request.duration is not None else "input",
        )
    if out.token_count is not None and out.token_count > config.max_count:
        seconds = config.max_count * downsample / FRAMES_PER_SECOND
        raise InputError(
            f"chunk {job.index} asks for {out.token_count} tokens, over this model's {config.max_count} "
            f"({seconds:.1f} s per chunk); ask for a shorter duration or send more text per request",
            param="duration",
        )
    return out


def fit_frames(mel: Tensor, frames: int) -> Tensor:
    """mel [80, T] -> [80, frames] by linear interpolation: codes come in steps of `downsample` frames and their
    count is the model's choice, so exact lengths (targets, speed) are met by resampling the mel."""
    if frames in (0, mel.shape[-1]):
        return mel[:, :frames]
    return F.interpolate(mel[None], size=frames, mode="linear", align_corners=False)[0]


def fused_kernels_available(device: torch.device, head_dim: int) -> bool:
    """The fused Triton decode kernels (rtvox.engines.ar_fused) run here: triton installed, a CUDA GPU of compute
    capability 8.0 or newer (bf16 tensor cores), a power-of-two attention head size."""
    if head_dim & (head_dim - 1) or device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 8:
        return False
    from rtvox.engines.ar_fused import HAVE_TRITON

    return HAVE_TRITON


class ARChunkStep:
    """Runs the AR family's batched chunk steps. Owns the decode engine (paged KV cache; on CUDA fixed-shape decode
    steps captured as CUDA graphs — around the fused Triton decode kernels for up to 16 rows where triton is
    installed, around eager kernels otherwise — so loading compiles no model code); uses the bundle's codec and
    vocoder. Built, and rebuilt after a fault, by Synthesizer.build_engines."""

    def __init__(self, bundle: ARBundle, device: torch.device, context_frames: int) -> None:
        self.bundle = bundle
        self.device = device
        self.context_frames = context_frames
        self.end_frames = end_silence_frames(bundle.config.vocoder)  # the chunk-end rule of every path
        self.decoder = self._new_decoder()

    def _new_decoder(self) -> ARDecodeEngine:
        cuda = self.device.type == "cuda"
        rows = CACHE_ROWS_CUDA if cuda else CACHE_ROWS_CPU
        return ARDecodeEngine(
            self.bundle.ar,
            num_blocks=rows * math.ceil(self.bundle.config.ar.max_positions / BLOCK_SIZE),
            block_size=BLOCK_SIZE,
            max_batch=MAX_BATCH,
            static=cuda,
            cuda_graph=cuda,
            compile_mode=None,
            kernels="triton" if fused_kernels_available(self.device, self.bundle.config.ar.head_dim) else "torch",
        )

    @torch.no_grad()
    def __call__(self, jobs: Sequence[ChunkJob]) -> list[AudioChunk]:
        """One AudioChunk per job, in order; pure with respect to the jobs, like run_chunk_step."""
        if not jobs:
            return []
        requests = [ar_request(self.bundle, job, request_id=str(row)) for row, job in enumerate(jobs)]
        try:
            codes = self.decoder.generate(requests)
        except BaseException:
            # a step cut short leaves its requests in the engine's queues: start the next step from a clean one
            self.decoder = self._new_decoder()
            raise
        mels = [self._mel(job, r, codes[r.request_id]) for job, r in zip(jobs, requests, strict=True)]
        audio = vocode_batched(
            self.bundle.vocoder, mels, end_frames=self.end_frames, context_frames=self.context_frames
        )
        return [
            audio_chunk(job, wav, allocate_frames(self._phoneme_weights(job, codes[r.request_id]), mel.shape[-1]))
            for job, r, mel, wav in zip(jobs, requests, mels, audio, strict=True)
        ]

    def _phoneme_weights(self, job: ChunkJob, tokens: list[int]) -> list[int]:
        """Relative time per phoneme of the chunk, for its timestamps: with phoneme-pointer tokens, how many tokens
        sat on each phoneme (what the model actually did); plain codes carry no alignment, so every phoneme
        weighs the same and timestamps are approximate."""
        n = len(job.prepared.chunks[job.index].ids)
        config = self.bundle.config.codec
        if not config.pointer or not tokens or n == 0:
            return [1] * n
        _, steps = split_tokens(torch.tensor([tokens]), config.advances)  # eos is never among a row's tokens
        return torch.bincount(pointer_track(steps, torch.tensor([n]))[0], minlength=n).tolist()

    def _mel(self, job: ChunkJob, ar: ARRequest, codes: list[int]) -> Tensor:
        """The row's tokens in its voice -> mel [80, frames] at the chunk's exact length (a phoneme-pointer codec
        also reads the row's phonemes)."""
        chunk, request = job.prepared.chunks[job.index], job.prepared.request
        codec = self.bundle.codec
        if codes:
            speaker = job.prepared.cond[:, :SPEAKER_EMBED_DIM].to(self.device)
            phonemes = torch.tensor([list(ar.phonemes) or [0]], device=self.device)
            ph_len = torch.tensor([max(len(ar.phonemes), 1)], device=self.device)
            tokens = torch.tensor([codes], device=self.device)
            mel = codec.decode_tokens(tokens, speaker, phonemes, ph_len)[0].float()
        else:  # eos at once: nothing to say
            mel = torch.zeros(codec.config.n_mels, 0, device=self.device)
        frames = chunk.target_frames if request.duration is not None else round(mel.shape[-1] / request.speed)
        return fit_frames(mel, frames)
