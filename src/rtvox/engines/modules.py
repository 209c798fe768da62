"""What each engine module is: the nn.Module an exporter takes, its model constants, example inputs, and the
adapter between the Synthesizer's call convention and the module's export-clean one.

The Synthesizer calls `acoustic_decode(hidden, durations)` (the eager `decode`, T read on the host); every
compiled backend runs `AcousticDecodeStep` (`decode_masked`), whose frame count comes from a frame-mask input.
`adapt_inputs` builds that mask, so either convention works with every backend.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from rtvox.constants import N_MELS, SPEAKER_EMBED_DIM
from rtvox.engines.shapes import MODULE_INPUTS, ShapeProfile
from rtvox.errors import InputError, ModelError
from rtvox.models.acoustic import AcousticDecodeStep, AcousticEncodeStep, AcousticModel
from rtvox.models.prosody import IDENTITY_ROW
from rtvox.models.vocos import Vocos

ModuleFn = Callable[..., Tensor | tuple[Tensor, ...]]


class EmotionStep(nn.Module):
    """EmotionEncoder with its mask made a required input (exporters want a fixed signature)."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, mel: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        out = self.encoder(mel, mask)
        return out[0], out[1]


def export_module(module: str, fn: ModuleFn | nn.Module) -> nn.Module:
    """The export-clean nn.Module for `module`, from a bound model method (what the Synthesizer passes:
    `acoustic.encode`, `acoustic.decode`) or a module (the vocoder, an encoder, or a step wrapper)."""
    owner = getattr(fn, "__self__", None)
    if module in ("acoustic_encode", "acoustic_decode"):
        if isinstance(fn, AcousticEncodeStep | AcousticDecodeStep):
            fn = fn.model
            owner = fn
        model = owner if isinstance(owner, AcousticModel) else fn
        if not isinstance(model, AcousticModel):
            raise ModelError(f"{module} needs an AcousticModel (or one of its methods), got {type(fn).__name__}")
        return AcousticEncodeStep(model) if module == "acoustic_encode" else AcousticDecodeStep(model)
    if module == "emotion":
        target = owner if isinstance(owner, nn.Module) else fn
        return target if isinstance(target, EmotionStep) else EmotionStep(target)  # type: ignore[arg-type]
    target = owner if isinstance(owner, nn.Module) else fn
    if not isinstance(target, nn.Module):
        raise ModelError(f"{module} needs an nn.Module, got {type(fn).__name__}")
    return target


def model_constants(net: nn.Module) -> dict[str, int]:
    """Fixed dims of the module's inputs/outputs (model width, condition size, ...) read from its config."""
    constants = {"mels": N_MELS, "speaker_dim": SPEAKER_EMBED_DIM}
    inner = getattr(net, "model", None) or getattr(net, "encoder", None) or net
    cfg = getattr(inner, "config", None)
    if isinstance(inner, AcousticModel):
        constants |= {"dim": inner.config.dim, "cond": inner.config.cond_dim}
    elif cfg is not None and hasattr(cfg, "embed_dim") and hasattr(cfg, "n_emotions"):
        constants |= {"emotion_dim": cfg.embed_dim, "n_emotions": cfg.n_emotions}
    elif cfg is not None and hasattr(cfg, "partial_frames"):
        constants |= {"partial_frames": cfg.partial_frames, "speaker_mels": cfg.n_mels}
    return constants


def make_inputs(
    module: str,
    sizes: dict[str, int],
    constants: dict[str, int],
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, ...]:
    """Plausible random inputs of the given axis sizes: real rows, full masks, unit scales, free durations."""
    g = generator or torch.Generator().manual_seed(0)
    out: list[Tensor] = []
    for spec in MODULE_INPUTS[module]:
        shape = tuple(d if isinstance(d, int) else sizes.get(d, constants.get(d, 0)) for d in spec.dims)
        if spec.name == "phonemes":
            t = torch.randint(1, 32, shape, generator=g)
        elif spec.kind == "bool":
            t = torch.ones(shape, dtype=torch.bool)
        elif spec.name == "durations":
            frames = sizes["frames"]
            t = torch.full(shape, max(frames // max(shape[1], 1), 1), dtype=torch.long)
        elif spec.name == "target_frames":
            t = torch.zeros(shape, dtype=torch.long)
        elif spec.name in ("speed", "pitch_scale", "energy_scale"):
            t = torch.ones(shape)
        elif spec.name == "prosody":
            t = torch.tensor(IDENTITY_ROW).expand(shape).clone()
        elif spec.name in ("mel", "mels"):
            t = torch.randn(shape, generator=g) - 4.0 if spec.name == "mel" else torch.rand(shape, generator=g)
        else:
            t = torch.randn(shape, generator=g)
        out.append(t.to(device))
    return tuple(out)


def example_inputs(
    module: str, net: nn.Module, profile: ShapeProfile, which: str = "opt", device: torch.device | str = "cpu"
) -> tuple[Tensor, ...]:
    """Inputs with every axis at the profile's `which` point (the exporters' example)."""
    constants = model_constants(net)
    sizes = {a: int(getattr(profile.axis(a), which)) for a in ("batch", "phonemes", "frames", "ref_frames")}
    # torch.export specializes dims of size 1: example at >= 2 so batch stays dynamic.
    if profile.batch.max >= 2:
        sizes["batch"] = max(sizes["batch"], 2)
    return make_inputs(module, sizes, constants, device)


def adapt_inputs(module: str, inputs: tuple[Tensor, ...], frames: int | None = None) -> tuple[Tensor, ...]:
    """Synthesizer convention -> engine convention. decode(hidden, durations) gets its frame mask here: of
    length `frames` if given (a bucket), else max(sum(durations)) (one host read, as eager decode does)."""
    if module == "acoustic_decode" and len(inputs) == 2:
        hidden, durations = inputs
        lengths = durations.sum(1)
        n = frames if frames is not None else max(int(lengths.max()), 1)
        mask = torch.arange(n, device=durations.device)[None, :] < lengths[:, None]
        return hidden, durations, mask
    if module == "emotion" and len(inputs) == 1:
        (mel,) = inputs
        return mel, torch.ones(mel.shape[0], mel.shape[2], dtype=torch.bool, device=mel.device)
    expected = len(MODULE_INPUTS[module])
    if len(inputs) != expected:
        raise InputError(f"{module} engine takes {expected} inputs, got {len(inputs)}")
    return inputs


# Submodules that stay fp32 in fp16/bf16 engines (matched as the end of a dotted module path):
# - the duration predictor: its output is rounded to whole frames, and a half-precision error there moves every
#   later frame of the audio, not just its loudness;
# - Vocos's output LayerNorm and iSTFT head: bf16 log-magnitudes and phases cost log-mel L1 0.10 against fp32
#   (0.011 with these two in fp32) for ~1 % of the vocoder's multiply-adds (2026-12-03, rtvox-small, CPU).
FP32_ISLANDS: tuple[str, ...] = ("variance.duration", "norm_out", "head")
# Islands whose name is generic: they count only as children of this module type.
_ISLAND_OWNERS: dict[str, type[nn.Module]] = {"norm_out": Vocos, "head": Vocos}


def _is_island(name: str, parent: nn.Module) -> bool:
    """Whether the submodule at dotted `name` (child of `parent`) stays fp32."""
    for island in FP32_ISLANDS:
        if name == island or name.endswith("." + island):
            owner = _ISLAND_OWNERS.get(island)
            return owner is None or isinstance(parent, owner)
    return False


class Fp32Island(nn.Module):
    """Runs the wrapped module in fp32 inside a half-precision network; its output stays fp32."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Tensor) -> Tensor:
        out: Tensor = self.inner(*(a.float() if a.is_floating_point() else a for a in args))
        return out


def cast_module(net: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """A copy of `net` on `device` in `dtype` (int8 and fp32 keep fp32 here: quantization happens later),
    so an engine never changes the bundle's modules the eager path still uses. FP32_ISLANDS stay fp32."""
    compute = dtype if dtype in (torch.float16, torch.bfloat16) else torch.float32
    out = copy.deepcopy(net).to(device=device, dtype=compute).eval()
    if compute != torch.float32:
        for name, sub in net.named_modules():
            parent, _, attr = name.rpartition(".")
            if name and _is_island(name, net.get_submodule(parent)):
                island = Fp32Island(copy.deepcopy(sub).to(device=device, dtype=torch.float32).eval())
                setattr(out.get_submodule(parent), attr, island)
    return out


class _StoredHalf(nn.Module):
    """Parametrization of a weight kept in fp16 on the device and used in fp32 (see `store_weights_fp16`)."""

    def forward(self, stored: Tensor) -> Tensor:
        return stored.float()


def store_weights_fp16(net: nn.Module, min_numel: int = 4096) -> int:
    """Keep `net`'s large fp32 weights in fp16 where fp16 holds them exactly, upcast to fp32 where they are used:
    the fp32 computation unchanged bit for bit, at half the resident weight bytes. The shipped safetensors are
    fp16, so every shipped weight qualifies; a weight fp16 would round is left as it is. Returns bytes saved."""
    saved = 0
    for sub in list(net.modules()):
        for name, param in list(sub.named_parameters(recurse=False)):
            if param.dtype != torch.float32 or param.numel() < min_numel:
                continue
            if not torch.equal(param.detach().half().float(), param.detach()):
                continue
            setattr(sub, name, nn.Parameter(param.detach().half(), requires_grad=False))
            parametrize.register_parametrization(sub, name, _StoredHalf(), unsafe=True)
            saved += param.numel() * 2
    return saved


def cast_inputs(inputs: tuple[Tensor, ...], dtype: torch.dtype) -> tuple[Tensor, ...]:
    """Floating inputs to the engine's compute dtype; ids, masks and durations as they are."""
    compute = dtype if dtype in (torch.float16, torch.bfloat16) else torch.float32
    return tuple(t.to(compute) if t.is_floating_point() else t for t in inputs)


def describe(net: nn.Module) -> dict[str, Any]:
    return {"class": type(net).__name__, "parameters": sum(p.numel() for p in net.parameters())}
