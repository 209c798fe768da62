"""FLOPs and bytes per second of audio, and the roofline floor a backend is measured against.

FLOPs come from torch.utils.flop_counter (matmuls and convolutions, transposed ones included; 2 per MAC) on
the eager module. The memory floor is what any implementation must move: every weight read once, the input
read once, the output written once, at the engine's dtype. Intermediate activations are left out on purpose:
a perfectly fused kernel keeps them on chip, so the floor says how far a backend is from the best possible,
not from the best of today's kernels. The floor time is max(FLOPs / peak FLOP/s, bytes / peak bandwidth).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from rtvox.constants import FRAMES_PER_SECOND
from rtvox.models.acoustic import AcousticModel


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops: float  # FLOP/s, dense, at the precision named below
    precision: str
    bandwidth: float  # bytes/s of device memory


# H200 SXM: ~989 TFLOP/s dense bf16/fp16 tensor core, 4.8 TB/s HBM3e.
H200 = Hardware("NVIDIA H200", 989e12, "bf16 dense", 4.8e12)


@dataclass(frozen=True)
class ModuleCost:
    """Work of one module for `audio_s` seconds of speech, and the same per second of audio."""

    module: str
    audio_s: float
    flops: float
    weight_bytes: float
    io_bytes: float

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.io_bytes

    def floor_s(self, hw: Hardware) -> float:
        return max(self.flops / hw.peak_flops, self.bytes / hw.bandwidth)

    def to_dict(self, hw: Hardware | None = None) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["gflop_per_audio_s"] = self.flops / self.audio_s / 1e9
        d["mb_per_audio_s"] = self.bytes / self.audio_s / 1e6
        d["arithmetic_intensity"] = self.flops / max(self.bytes, 1.0)
        if hw is not None:
            d["floor_ms"] = self.floor_s(hw) * 1e3
            d["floor_bound"] = "compute" if self.flops / hw.peak_flops >= self.bytes / hw.bandwidth else "memory"
            d["hardware"] = hw.name
        return d


def count_flops(net: nn.Module | Any, inputs: tuple[Tensor, ...]) -> float:
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        net(*inputs)
    return float(counter.get_total_flops())


def _nbytes(tensors: Any) -> float:
    if isinstance(tensors, Tensor):
        return float(tensors.numel() * tensors.element_size())
    return float(sum(_nbytes(t) for t in tensors))


def module_cost(
    module: str,
    net: nn.Module | Any,
    inputs: tuple[Tensor, ...],
    audio_s: float,
    dtype_bytes: int = 2,
    weights: list[nn.Module] | None = None,
) -> ModuleCost:
    """Cost of running `net(*inputs)` once for `audio_s` seconds of speech; weights/activations counted at
    `dtype_bytes` per float element (2 for fp16/bf16)."""
    flops = count_flops(net, inputs)
    with torch.no_grad():
        outputs = net(*inputs)
    owners = weights if weights is not None else ([net] if isinstance(net, nn.Module) else [])
    n_weights = sum(p.numel() for owner in owners for p in owner.parameters())
    floats = [t for t in (*inputs, *((outputs,) if isinstance(outputs, Tensor) else outputs))]
    io = sum(t.numel() * (dtype_bytes if t.is_floating_point() else t.element_size()) for t in floats)
    return ModuleCost(module, audio_s, flops, float(n_weights * dtype_bytes), float(io))


def acoustic_and_vocoder_costs(acoustic: AcousticModel, vocoder: nn.Module, seconds: float = 10.0) -> list[ModuleCost]:
    """Costs of the acoustic model (encode + decode) and the vocoder for one utterance of `seconds`."""
    from rtvox.engines.quality import random_inputs

    cfg = acoustic.config
    frames = round(seconds * FRAMES_PER_SECOND)
    phonemes = max(2, frames // 8)  # ~8 frames per phoneme: ordinary speech
    device = next(acoustic.parameters()).device
    inputs = random_inputs([phonemes], cfg.cond_dim, cfg.vocab_size, [frames]).tensors(device)
    # Each half reads only its own weights.
    encode_weights: list[nn.Module] = [acoustic.embed, acoustic.encoder, acoustic.cond_proj, acoustic.variance]
    decode_weights: list[nn.Module] = [
        m for m in (acoustic.decoder, acoustic.mel_out, acoustic.postnet) if m is not None
    ]
    encode_cost = module_cost("acoustic_encode", acoustic.encode, inputs, seconds, weights=encode_weights)
    with torch.no_grad():
        hidden, durations = acoustic.encode(*inputs)
        mask = torch.arange(frames, device=device)[None] < durations.sum(1, keepdim=True)
        mel = acoustic.decode_masked(hidden, durations, mask)
    decode_cost = module_cost(
        "acoustic_decode",
        acoustic.decode_masked,
        (hidden, durations, mask),
        seconds,
        weights=decode_weights,
    )
    vocoder_cost = module_cost("vocoder", vocoder, (mel,), seconds)
    return [encode_cost, decode_cost, vocoder_cost]
