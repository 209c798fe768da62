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

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.models.acoustic import MEL_PAD_VALUE
from rtvox.models.vocoder import HiFiGAN, VocoderConfig
from rtvox.runtime.preempt import preemption_point

DEFAULT_WINDOW_FRAMES = 64
DEFAULT_CONTEXT_FRAMES = 16  # >= receptive_field_frames of every preset (14 for v1/light)

VocodeFn = Callable[[Tensor], Tensor | tuple[Tensor, ...]]  # mel[1, 80, T] -> wav[1, T * HOP] (or an Engine tuple)


def receptive_field_frames(vocoder: HiFiGAN | VocoderConfig) -> int:
    """One-sided receptive field of a HiFi-GAN generator in mel frames (an upper bound, rounded up; see
    `VocoderConfig.receptive_field_frames`)."""
    cfg = vocoder.config if isinstance(vocoder, HiFiGAN) else vocoder
    return cfg.receptive_field_frames


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


# ---------------------------------------------------------------------------------------------- batched windows
# The service vocodes many chunks at once. Rows of one engine call must share a length, and padding a row changes
# the samples within the receptive field of the padding. A window whose context on one side is >= the receptive
# field can be padded on that side freely, so: windows with full right context are right-padded into one call,
# windows ending at the mel's end (full left context) are left-padded into another, and only windows with short
# context on both sides (mels shorter than two contexts) need rows of equal length. Every row's emitted samples
# are then those of one-shot `vocode(mel)` (up to float rounding).
#
# A chunk is vocoded followed by silence (`end_frames`, rtvox.models.vocoder.end_silence_frames: the rule every
# backend follows at a chunk's end): those frames are right context the windows read but emit no audio for, and as
# they cover the receptive field, what lies past them does not matter: every row goes into the right-padded call,
# and a chunk of up to window_frames is one window.

DEFAULT_BATCH_WINDOW_FRAMES = 256  # larger than DEFAULT_WINDOW_FRAMES: the overlap costs 2 * context per window
DEFAULT_MAX_ROWS = 64  # most windows in one vocoder call (bounds activation memory)


@dataclass(frozen=True)
class MelWindow:
    """One vocoder window of a mel: frames [start, stop) in, audio of frames [new_start, new_stop) kept."""

    source: int  # which mel of the batch (index into the list given to vocode_batched)
    start: int  # first frame fed to the vocoder (left context included)
    stop: int  # one past the last frame fed (right context included)
    new_start: int  # first frame whose audio this window emits
    new_stop: int  # one past the last such frame
    exact_left: bool  # left context shorter than required: the row must start exactly at `start` (the mel start)
    exact_right: bool  # right context shorter than required: the row must end exactly at `stop` (the mel end)


def context_frames_for(vocoder: object) -> int:
    """Context (frames, one side) that makes window joins exact for `vocoder`: at least DEFAULT_CONTEXT_FRAMES.

    HiFi-GAN: its receptive field. An iSTFT vocoder (Vocos family, config with `layers`, `kernel`, `n_fft`):
    the embedding conv and every depthwise conv reach kernel // 2 frames, and the inverse STFT window of n_fft
    samples centred half a hop into its frame reaches (n_fft / 2 + hop / 2) / hop frames; one frame of margin.
    """
    if isinstance(vocoder, HiFiGAN):
        return max(DEFAULT_CONTEXT_FRAMES, receptive_field_frames(vocoder))
    cfg = getattr(vocoder, "config", None)
    layers, kernel, n_fft = (getattr(cfg, name, None) for name in ("layers", "kernel", "n_fft"))
    if not isinstance(layers, int) or not isinstance(kernel, int) or not isinstance(n_fft, int):
        raise ValueError(f"no receptive field known for vocoder {type(vocoder).__name__}; add it to context_frames_for")
    istft = math.ceil((n_fft / 2 + HOP_LENGTH / 2) / HOP_LENGTH)
    return max(DEFAULT_CONTEXT_FRAMES, (kernel // 2) * (layers + 1) + istft + 1)


def plan_windows(
    source: int, n_frames: int, window_frames: int, context_frames: int, end_frames: int = 0
) -> list[MelWindow]:
    """Cover frames [0, n_frames) with windows of <= window_frames new frames each.

    `end_frames` > 0 (at least the vocoder's receptive field): frames [n_frames, n_frames + end_frames) are
    silence the windows read as right context (`stop` reaches into them); past that silence nothing reaches the
    mel's samples, so every window may be right-padded. Without it, a mel of at least 2 * context frames is split
    into >= 2 pieces of >= context frames each, so the first piece has full right context and the last full left
    context (they can join padded batches); shorter mels are one window that must run at its exact length.
    """
    if n_frames <= 0:
        return []
    pieces = math.ceil(n_frames / window_frames)
    if context_frames and not end_frames:
        # >= 2 pieces of >= context frames each when the mel is long enough, else one exact-length window
        pieces = 1 if n_frames < 2 * context_frames else min(max(2, pieces), n_frames // context_frames)
    bounds = [round(i * n_frames / pieces) for i in range(pieces + 1)]
    windows = []
    for new_start, new_stop in itertools.pairwise(bounds):
        start = max(0, new_start - context_frames)
        stop = min(n_frames + end_frames, new_stop + context_frames)
        windows.append(
            MelWindow(
                source,
                start,
                stop,
                new_start,
                new_stop,
                exact_left=new_start - start < context_frames,
                exact_right=not end_frames and stop - new_stop < context_frames,
            )
        )
    return windows


def vocode_batched(
    vocode: VocodeFn,
    mels: Sequence[Tensor],
    *,
    end_frames: int,
    context_frames: int = DEFAULT_CONTEXT_FRAMES,
    window_frames: int = DEFAULT_BATCH_WINDOW_FRAMES,
    max_rows: int = DEFAULT_MAX_ROWS,
    pad_value: float = MEL_PAD_VALUE,
) -> list[np.ndarray]:
    """Vocode several mels [n_mels, T_i] in few batched calls, each followed by `end_frames` of silence
    (`pad_value`; 0 or at least the vocoder's receptive field); returns float32 audio of T_i * HOP_LENGTH each,
    equal to the first T_i * HOP_LENGTH samples of `vocode(with_end_silence(mel, end_frames)[None])[0]`
    (rtvox.models.vocoder) per mel when context_frames >= the vocoder's receptive field (end_frames 0: to
    `vocode(mel[None])[0]`)."""
    windows = [
        w
        for i, mel in enumerate(mels)
        for w in plan_windows(i, mel.shape[-1], window_frames, context_frames, end_frames)
    ]
    right_padded = [w for w in windows if not w.exact_right]
    left_padded = [w for w in windows if w.exact_right and not w.exact_left]
    exact: dict[int, list[MelWindow]] = {}
    for w in windows:
        if w.exact_left and w.exact_right:
            exact.setdefault(w.stop - w.start, []).append(w)
    out: dict[tuple[int, int], np.ndarray] = {}
    groups = [(right_padded, False), (left_padded, True), *((g, False) for g in exact.values())]
    for group, pad_left in groups:
        for lo in range(0, len(group), max_rows):
            preemption_point()  # urgent work waiting for this engine thread runs here (rtvox.runtime.preempt)
            _vocode_group(vocode, mels, group[lo : lo + max_rows], pad_left, pad_value, out)
    results = []
    for i, mel in enumerate(mels):
        parts = [out[(i, w.new_start)] for w in windows if w.source == i]
        results.append(np.concatenate(parts) if parts else np.zeros(0, np.float32))
        assert results[-1].shape[0] == mel.shape[-1] * HOP_LENGTH
    return results


def _vocode_group(
    vocode: VocodeFn,
    mels: Sequence[Tensor],
    group: list[MelWindow],
    pad_left: bool,
    pad_value: float,
    out: dict[tuple[int, int], np.ndarray],
) -> None:
    length = max(w.stop - w.start for w in group)
    first = mels[group[0].source]
    batch = torch.full((len(group), first.shape[-2], length), pad_value, dtype=first.dtype, device=first.device)
    offsets = []
    for row, w in enumerate(group):
        offset = length - (w.stop - w.start) if pad_left else 0
        real = mels[w.source][..., w.start : w.stop]  # frames past the mel's end stay `pad_value`: its end silence
        batch[row, :, offset : offset + real.shape[-1]] = real.to(first.device)
        offsets.append(offset)
    with torch.inference_mode():
        result = vocode(batch)
    wav = (result[0] if isinstance(result, tuple) else result).detach().float().cpu().numpy()  # [rows, L * HOP]
    for row, (w, offset) in enumerate(zip(group, offsets, strict=True)):
        lo = (offset + w.new_start - w.start) * HOP_LENGTH
        out[(w.source, w.new_start)] = np.ascontiguousarray(wav[row, lo : lo + (w.new_stop - w.new_start) * HOP_LENGTH])
