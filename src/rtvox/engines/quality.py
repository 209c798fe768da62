"""Quality of an engine set against eager fp32: the log-mel L1 of the audio, and a batched pipeline run.

`log_mel_l1` is the acceptance metric of issue 4 (≤ 0.05 for every shipped engine): the mean absolute
difference of the log-mel spectrograms (rtvox.audio.mel, natural log, floor 1e-5) of two waveforms.
`run_pipeline` pushes one batch of requests through encode → decode → vocoder engines the way the
Synthesizer does, so tests, `rtvox bench` and the GPU script measure the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rtvox.constants import HOP_LENGTH, SPEAKER_EMBED_DIM
from rtvox.engines.base import Engine
from rtvox.models.prosody import IDENTITY_ROW
from rtvox.models.vocoder import with_end_silence

_MEL: dict[str, torch.nn.Module] = {}


def log_mel(wav: Tensor) -> Tensor:
    """wav [B, S] (any device) -> log-mel [B, 80, T] on the CPU in fp32."""
    from rtvox.audio.mel import MelSpectrogram

    mel = _MEL.setdefault("mel", MelSpectrogram().eval())
    with torch.inference_mode():
        out: Tensor = mel(wav.detach().float().cpu())
        return out


def log_mel_l1(wav: Tensor, reference: Tensor) -> float:
    """Mean |log-mel(wav) - log-mel(reference)| over the common length."""
    n = min(wav.shape[-1], reference.shape[-1])
    a, b = log_mel(wav[..., :n]), log_mel(reference[..., :n])
    return float((a - b).abs().mean())


@dataclass(frozen=True)
class PipelineInputs:
    """One batch of acoustic-model inputs (what the Synthesizer builds per chunk, batched)."""

    phonemes: Tensor  # Long[B, N], 0 at padding
    mask: Tensor  # Bool[B, N]
    cond: Tensor  # [B, C]
    speed: Tensor  # [B]
    target_frames: Tensor  # Long[B], 0 = natural length
    pitch_scale: Tensor  # [B]
    energy_scale: Tensor  # [B]
    prosody: Tensor  # [B, 4] emotion prosody prior rows (IDENTITY_ROW: none)

    def tensors(self, device: torch.device | str) -> tuple[Tensor, ...]:
        return tuple(
            t.to(device)
            for t in (
                self.phonemes,
                self.mask,
                self.cond,
                self.speed,
                self.target_frames,
                self.pitch_scale,
                self.energy_scale,
                self.prosody,
            )
        )


def random_inputs(
    lengths: list[int], cond_dim: int, vocab_size: int, targets: list[int] | None = None, seed: int = 0
) -> PipelineInputs:
    """Random phonemes per row length, a unit non-negative speaker part, optional exact frame targets."""
    g = torch.Generator().manual_seed(seed)
    b, n = len(lengths), max(lengths)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    phonemes = torch.randint(1, vocab_size, (b, n), generator=g).masked_fill(~mask, 0)
    cond = torch.randn(b, cond_dim, generator=g)
    cond[:, :SPEAKER_EMBED_DIM] = torch.nn.functional.normalize(cond[:, :SPEAKER_EMBED_DIM].abs(), dim=-1)
    target = torch.tensor(targets if targets is not None else [0] * b, dtype=torch.long)
    ones = torch.ones(b)
    prosody = torch.tensor(IDENTITY_ROW).repeat(b, 1)
    return PipelineInputs(phonemes, mask, cond, ones.clone(), target, ones.clone(), ones.clone(), prosody)


def run_pipeline(
    engines: dict[str, Engine], inputs: PipelineInputs, device: torch.device, *, end_frames: int = 0
) -> tuple[Tensor, Tensor]:
    """encode → decode → vocoder; returns (wav [B, S] fp32, frame lengths Long[B]). Samples past each row's
    length are zeroed so padded tails never count in a comparison. `end_frames`: silence frames vocoded past the
    batch's longest row (rtvox.models.vocoder.end_silence_frames gives each row the edge the Synthesizer's paths
    give a chunk; 0: the vocoder's own zero padding past the longest row)."""
    hidden, durations = engines["acoustic_encode"](*inputs.tensors(device))
    (mel,) = engines["acoustic_decode"](hidden, durations)
    (wav,) = engines["vocoder"](with_end_silence(mel, end_frames))
    wav = wav[:, : mel.shape[2] * HOP_LENGTH]
    lengths = durations.sum(1)
    keep = torch.arange(wav.shape[1], device=wav.device)[None, :] < (lengths * HOP_LENGTH)[:, None]
    return wav.float() * keep, lengths
