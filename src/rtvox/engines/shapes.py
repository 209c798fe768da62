"""One shape-profile spec for every compiled backend.

Each engine input is described once, by named axes (`batch`, `phonemes`, `frames`, `ref_frames`) and model
constants (`dim`, `cond`, `mels`, ...). A `ShapeProfile` gives every named axis a min/opt/max range and a
bucket list. From that one object come:

    inductor   fixed buckets (inputs padded up to the next bucket; CUDA graphs are captured per bucket)
    aoti       torch.export Dims (min..max), example inputs at opt
    onnx       dynamic axis names, and ORT-TensorRT min/opt/max profile strings
    tensorrt   optimization profiles (min/opt/max shape per input)

so the backends can never disagree about which lengths an engine accepts.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rtvox.constants import HOP_LENGTH, MAX_CHUNK_PHONEMES
from rtvox.errors import InputError

AXES: tuple[str, ...] = ("batch", "phonemes", "frames", "ref_frames")
Kind = Literal["float", "long", "bool"]


class ShapeOutOfProfileError(InputError):
    """An input longer than a compiled engine's shape profile allows (the engine serves it through eager fp32 when
    it was built with an overflow engine: `CompiledEngine.overflow`)."""


@dataclass(frozen=True)
class AxisRange:
    """Range of one dynamic axis: [min, max], tuned for `opt`; `buckets` (ascending, last == max) are the
    padded sizes static-shape backends compile for."""

    min: int
    opt: int
    max: int
    buckets: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.opt <= self.max:
            raise ValueError(f"need 1 <= min <= opt <= max, got {self.min}, {self.opt}, {self.max}")
        if not self.buckets or list(self.buckets) != sorted(set(self.buckets)) or self.buckets[-1] != self.max:
            raise ValueError(f"buckets {self.buckets} must ascend without repeats and end at max={self.max}")
        if self.buckets[0] < self.min:
            raise ValueError(f"bucket {self.buckets[0]} is below min={self.min}")

    def bucket(self, n: int, axis: str = "axis") -> int:
        """Smallest bucket >= n (InputError past max: the caller must split its input)."""
        if n > self.max:
            raise ShapeOutOfProfileError(
                f"{axis} length {n} exceeds the engine's shape profile (max {self.max}); split the input"
            )
        return self.buckets[bisect.bisect_left(self.buckets, max(n, self.min))]


@dataclass(frozen=True)
class InputSpec:
    """One engine input: name, dims (axis names or model-constant names, or ints), element kind, and the value
    that pads it along its sequence axes."""

    name: str
    dims: tuple[str | int, ...]
    kind: Kind = "float"
    pad: float = 0.0


# The engine signature of every module, in call order. Outputs use the same axis names ("samples" =
# frames * HOP_LENGTH) so engines can cut padded outputs back to the caller's sizes.
MODULE_INPUTS: dict[str, tuple[InputSpec, ...]] = {
    "acoustic_encode": (
        InputSpec("phonemes", ("batch", "phonemes"), "long", 0),
        InputSpec("phoneme_mask", ("batch", "phonemes"), "bool", 0),
        InputSpec("cond", ("batch", "cond")),
        InputSpec("speed", ("batch",), "float", 1.0),
        InputSpec("target_frames", ("batch",), "long", 0),
        InputSpec("pitch_scale", ("batch",), "float", 1.0),
        InputSpec("energy_scale", ("batch",), "float", 1.0),
        # the emotion prosody prior's row (pitch shift, pitch range, energy shift, duration); padding rows
        # repeat a real row (CompiledEngine), so the scalar pad is never read
        InputSpec("prosody", ("batch", 4), "float", 0.0),
    ),
    "acoustic_decode": (
        InputSpec("hidden", ("batch", "phonemes", "dim")),
        InputSpec("durations", ("batch", "phonemes"), "long", 0),
        InputSpec("frame_mask", ("batch", "frames"), "bool", 0),
    ),
    # Padding frames of a mel hold the log-mel of silence (acoustic.MEL_PAD_VALUE = log(1e-5)).
    "vocoder": (InputSpec("mel", ("batch", "mels", "frames"), "float", -11.512925464970229),),
    "speaker": (InputSpec("mels", ("batch", "partial_frames", "speaker_mels")),),
    "emotion": (
        InputSpec("mel", ("batch", "mels", "ref_frames"), "float", -11.512925464970229),
        InputSpec("mask", ("batch", "ref_frames"), "bool", 0),
    ),
}
MODULE_OUTPUTS: dict[str, tuple[tuple[str, tuple[str | int, ...]], ...]] = {
    "acoustic_encode": (("hidden", ("batch", "phonemes", "dim")), ("durations", ("batch", "phonemes"))),
    "acoustic_decode": (("mel", ("batch", "mels", "frames")),),
    "vocoder": (("wav", ("batch", "samples")),),
    "speaker": (("embedding", ("batch", "speaker_dim")),),
    "emotion": (("embedding", ("batch", "emotion_dim")), ("logits", ("batch", "n_emotions"))),
}
# Axes that static-shape backends pad to the bucket of another axis' size instead of bucketing on their own
# (decode's phoneme axis only feeds a gather: one phoneme bucket per frame bucket keeps the graph count low).
PINNED_AXES: dict[str, tuple[str, ...]] = {"acoustic_decode": ("phonemes",)}


def _axis(lo: int, opt: int, buckets: tuple[int, ...]) -> AxisRange:
    return AxisRange(lo, opt, buckets[-1], buckets)


@dataclass(frozen=True)
class ShapeProfile:
    """Ranges of every named axis. Presets by exact name; `key()` enters the engine cache key."""

    name: str
    batch: AxisRange
    phonemes: AxisRange
    frames: AxisRange
    ref_frames: AxisRange
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    PRESETS = ("default", "batch1", "serve", "ci")

    @classmethod
    def preset(cls, name: str) -> ShapeProfile:
        # phonemes: chunks hold <= MAX_CHUNK_PHONEMES (200); frames: 4096 = 43.7 s, past any chunk at speed 0.5.
        phon = (16, 32, 64, 128, 2 ** (MAX_CHUNK_PHONEMES - 1).bit_length())
        if name == "default":
            return cls(
                name,
                _axis(1, 1, (1, 8, 32, 64)),
                _axis(2, 64, phon),
                _axis(2, 512, (128, 256, 512, 1024, 2048, 4096)),
                _axis(2, 512, (512, 1024, 2048, 4096)),
            )
        if name == "batch1":  # single-stream serving: few buckets, quick warm-up
            return cls(
                name,
                _axis(1, 1, (1,)),
                _axis(2, 64, phon),
                _axis(2, 512, (256, 1024, 4096)),
                _axis(2, 512, (1024, 4096)),
            )
        if name == "serve":  # the service's captured pipeline: dense batch buckets, fine frame buckets
            return cls(
                name,
                _axis(1, 1, (1, 2, 4, 8, 16, 32, 64)),
                _axis(2, 64, (32, 64, 128, 2 ** (MAX_CHUNK_PHONEMES - 1).bit_length())),
                _axis(2, 512, (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)),  # rows pad to the longest
                _axis(2, 512, (512, 1024, 2048, 4096)),
            )
        if name == "ci":  # tiny ranges: CPU tests compile a handful of graphs
            return cls(name, _axis(1, 1, (1, 2)), _axis(2, 16, (16, 64)), _axis(2, 64, (64, 256)), _axis(2, 64, (64,)))
        raise InputError(f"unknown shape profile {name!r}; one of {', '.join(cls.PRESETS)}", param="profile")

    def axis(self, name: str) -> AxisRange:
        if name not in AXES:
            raise KeyError(name)
        axis: AxisRange = getattr(self, name)
        return axis

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **{a: asdict(self.axis(a)) for a in AXES}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShapeProfile:
        axes = {a: AxisRange(**{**data[a], "buckets": tuple(data[a]["buckets"])}) for a in AXES}
        return cls(str(data["name"]), axes["batch"], axes["phonemes"], axes["frames"], axes["ref_frames"])

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    # ------------------------------------------------------------------ per-module views
    def resolve(self, dim: str | int, constants: dict[str, int], which: str) -> int:
        """Size of one dim: an int as is, a model constant from `constants`, an axis at min/opt/max."""
        if isinstance(dim, int):
            return dim
        if dim in constants:
            return constants[dim]
        return int(getattr(self.axis(dim), which))

    def shapes(self, module: str, constants: dict[str, int], which: str) -> dict[str, tuple[int, ...]]:
        """Input name -> shape with every axis at `which` (min, opt or max): one TensorRT profile point."""
        return {
            spec.name: tuple(self.resolve(d, constants, which) for d in spec.dims) for spec in MODULE_INPUTS[module]
        }

    def dynamic_axes(self, module: str) -> dict[str, dict[int, str]]:
        """ONNX dynamic axes: input/output name -> {position: axis name}."""
        axes: dict[str, dict[int, str]] = {}
        for spec in MODULE_INPUTS[module]:
            axes[spec.name] = {i: d for i, d in enumerate(spec.dims) if isinstance(d, str) and d in AXES}
        for name, dims in MODULE_OUTPUTS[module]:
            axes[name] = {i: d for i, d in enumerate(dims) if isinstance(d, str) and (d in AXES or d == "samples")}
        return axes

    def bucket_grid(self, module: str) -> list[dict[str, int]]:
        """Every combination of buckets of the axes `module`'s inputs use (pinned axes excluded): the shapes a
        static backend compiles and warms up."""
        used = [a for a in AXES if any(a in s.dims for s in MODULE_INPUTS[module])]
        used = [a for a in used if a not in PINNED_AXES.get(module, ())]
        grid: list[dict[str, int]] = [{}]
        for axis in used:
            grid = [{**g, axis: b} for g in grid for b in self.axis(axis).buckets]
        return grid


def output_size(dim: str | int, sizes: dict[str, int], constants: dict[str, int]) -> int:
    """Size of one output dim given the real axis sizes (`samples` = frames * HOP_LENGTH)."""
    if isinstance(dim, int):
        return dim
    if dim == "samples":
        return sizes["frames"] * HOP_LENGTH
    return sizes[dim] if dim in sizes else constants[dim]
