"""Overlapped streaming vocoding: mel frames in as they arrive, final audio out as soon as it is vocoded.

HiFi-GAN is a stack of convolutions, so output sample j depends only on mel frames within a bounded distance of
frame j // HOP_LENGTH: its receptive field. Vocoding a window of new frames with at least that many frames of real
context on each side therefore gives, inside the new-frame region, the same samples as one-shot synthesis (up to
float rounding); the context part of the output is discarded. At the start and end of the stream the window edge
is the stream edge, so the vocoder's own zero padding matches one-shot synthesis there too.

    frames:   ... | left context | window_frames new frames | right context | ...
    output:         discarded      emitted (window * HOP)     discarded (or crossfade tail)

Receptive field of the shipped presets, one side, in mel frames (`receptive_field_frames`, checked against a
measured impulse response in the tests): "v1" and "light" 14, "tiny" 6. Almost all of it comes from conv_pre
(3 frames) and the first stage (transposed conv ~1.4 frames + largest MRF branch kernel 11, dilations 1/3/5:
60 samples at 8x = 7.5 frames). A context of 16 frames is enough for every preset.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.models.vocoder import HiFiGAN, VocoderConfig

DEFAULT_WINDOW_FRAMES = 64
DEFAULT_CONTEXT_FRAMES = 16  # >= receptive_field_frames of every preset (14 for v1/light)

VocodeFn = Callable[[Tensor], Tensor | tuple[Tensor, ...]]  # mel[1, 80, T] -> wav[1, T * HOP] (or an Engine tuple)


def receptive_field_frames(vocoder: HiFiGAN | VocoderConfig) -> int:
    """One-sided receptive field of a HiFi-GAN generator in mel frames (an upper bound, rounded up).

    Summed layer by layer, each converted to frames at the sample rate of that layer: conv_pre (kernel 7),
    per stage the transposed conv (kernel k, rate r, padding (k - r) / 2 reaches (k + r - 2) / (2r) input samples)
    and the widest MRF branch (per dilation d: d (K - 1) / 2 + (K - 1) / 2 samples), then conv_post (kernel 7).
    """
    cfg = vocoder.config if isinstance(vocoder, HiFiGAN) else vocoder
    frames = 3.0  # conv_pre, kernel 7, at 1 sample per frame
    per_frame = 1  # samples per frame at the current layer
    for rate, kernel in zip(cfg.upsample_rates, cfg.upsample_kernels, strict=True):
        frames += (kernel + rate - 2) / (2 * rate) / per_frame
        per_frame *= rate
        mrf = max(
            sum((d + 1) * (k - 1) // 2 for d in dilations)
            for k, dilations in zip(cfg.resblock_kernels, cfg.resblock_dilations, strict=True)
        )
        frames += mrf / per_frame
    frames += 3 / per_frame  # conv_post, kernel 7, at full rate
    return math.ceil(frames)


class StreamingVocoder:
    """Turns a stream of mel frames into a stream of final audio, one vocoder window at a time.

    Owns the not-yet-vocoded mel frames (plus the left context the next window needs), the count of frames whose
    audio has been emitted, and the crossfade tail of the previous window. It does not own the vocoder: `vocode` is
    any callable mel[1, 80, T] -> wav[1, T * HOP_LENGTH] (a `HiFiGAN`, or an Engine returning a 1-tuple).

    Windows are vocoded as soon as `window_frames` new frames and `context_frames` of right context have arrived,
    so every window except the first and last has the same shape (context + window + context frames), which suits
    compiled engines with static shapes. Total audio is exactly frames * HOP_LENGTH samples, sample-aligned with
    one-shot `vocode(mel)`.

    `crossfade_samples` (default 0): with context >= the receptive field the joins are already exact and no
    crossfade is needed. With less context (a cheaper setting), a linear crossfade over the first
    `crossfade_samples` of each window against the previous window's output for the same samples (taken from its
    right context) softens the mismatch at the join (measured on "light" with context 4: join error 4.6e-3 -> 2.1e-3
    with 64 samples; with context 2 it does not help, as the previous window's tail is itself wrong). It must fit in
    the right context.
    """

    def __init__(
        self,
        vocode: VocodeFn,
        *,
        window_frames: int = DEFAULT_WINDOW_FRAMES,
        context_frames: int = DEFAULT_CONTEXT_FRAMES,
        crossfade_samples: int = 0,
        n_mels: int = N_MELS,
    ) -> None:
        if window_frames < 1:
            raise ValueError(f"window_frames must be >= 1, got {window_frames}")
        if context_frames < 0:
            raise ValueError(f"context_frames must be >= 0, got {context_frames}")
        if not 0 <= crossfade_samples <= context_frames * HOP_LENGTH:
            raise ValueError(
                f"crossfade_samples must be between 0 and context_frames * HOP_LENGTH "
                f"({context_frames * HOP_LENGTH}), got {crossfade_samples}; raise context_frames or lower it"
            )
        self.vocode = vocode
        self.window_frames = window_frames
        self.context_frames = context_frames
        self.crossfade_samples = crossfade_samples
        self.n_mels = n_mels
        self.reset()

    def reset(self) -> None:
        """Forget all state and start a new stream."""
        self._mel: Tensor | None = None  # [1, n_mels, n]: frames from self._mel_start on
        self._mel_start = 0  # absolute index of the first buffered frame
        self._received = 0  # frames pushed so far
        self._emitted = 0  # frames whose audio has been returned
        self._tail: np.ndarray | None = None  # previous window's output for the next crossfade_samples samples

    @property
    def frames_received(self) -> int:
        return self._received

    @property
    def samples_emitted(self) -> int:
        return self._emitted * HOP_LENGTH

    def push(self, mel_frames: Tensor) -> np.ndarray:
        """Accept mel[1, n_mels, t] (any t >= 0); return the float32 audio [n] that is now final (maybe empty)."""
        if mel_frames.dim() != 3 or mel_frames.shape[0] != 1 or mel_frames.shape[1] != self.n_mels:
            raise ValueError(f"push expects mel of shape [1, {self.n_mels}, t], got {list(mel_frames.shape)}")
        if mel_frames.shape[2]:
            self._mel = mel_frames if self._mel is None else torch.cat([self._mel, mel_frames], dim=2)
            self._received += mel_frames.shape[2]
        pieces = []
        while self._received - self._emitted >= self.window_frames + self.context_frames:
            pieces.append(self._vocode_next(self.window_frames, self.context_frames))
        return _concat(pieces)

    def flush(self) -> np.ndarray:
        """Vocode every remaining frame (the stream end is the window end, as in one-shot) and reset."""
        pieces = []
        while self._received > self._emitted:
            pieces.append(self._vocode_next(min(self.window_frames, self._received - self._emitted), None))
        self.reset()
        return _concat(pieces)

    def _vocode_next(self, n_new: int, right: int | None) -> np.ndarray:
        # right=None: take every frame still buffered after the new ones (at flush, that is up to the stream end)
        assert self._mel is not None
        left = min(self.context_frames, self._emitted)
        start = self._emitted - left - self._mel_start
        stop = self._mel.shape[2] if right is None else start + left + n_new + right
        stop = min(stop, self._mel.shape[2])
        with torch.inference_mode():
            out = self.vocode(self._mel[:, :, start:stop])
        wav_t = out[0] if isinstance(out, tuple) else out  # [1, (stop - start) * HOP]
        wav = wav_t[0].detach().float().cpu().numpy()
        assert wav.shape[0] == (stop - start) * HOP_LENGTH, "vocoder must return exactly T * HOP_LENGTH samples"
        lo, hi = left * HOP_LENGTH, (left + n_new) * HOP_LENGTH
        chunk = wav[lo:hi].copy()
        if self._tail is not None:
            n = min(self._tail.shape[0], chunk.shape[0])
            ramp = (np.arange(1, n + 1, dtype=np.float32) / (n + 1)).astype(np.float32)
            chunk[:n] = self._tail[:n] * (1.0 - ramp) + chunk[:n] * ramp
        xf = min(self.crossfade_samples, wav.shape[0] - hi)
        self._tail = wav[hi : hi + xf].copy() if xf > 0 else None
        self._emitted += n_new
        # keep only the left context the next window needs
        keep_from = max(self._emitted - self.context_frames, 0)
        self._mel = self._mel[:, :, keep_from - self._mel_start :]
        self._mel_start = keep_from
        return chunk


def _concat(pieces: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
