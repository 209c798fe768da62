"""The one shape spec and its views, bucket padding of compiled engines, the engine cache key, auto fallback."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from rtvox.engines.base import BuildOptions
from rtvox.engines.build import build_engines, parse_dtype
from rtvox.engines.cache import CacheKey, runtime_versions
from rtvox.engines.compiled import CompiledEngine
from rtvox.engines.modules import model_constants
from rtvox.engines.shapes import AxisRange, ShapeProfile
from rtvox.errors import InputError
from rtvox.models.bundle import ModelBundle

from .conftest import CPU


def test_profile_views_agree() -> None:
    p = ShapeProfile.preset("default")
    consts = {"dim": 32, "cond": 272, "mels": 80}
    lo, opt, hi = (p.shapes("acoustic_decode", consts, w) for w in ("min", "opt", "max"))
    assert lo["hidden"] == (1, 2, 32) and hi["frame_mask"] == (64, 4096)
    assert opt["frame_mask"] == (1, 512)
    axes = p.dynamic_axes("vocoder")
    assert axes["mel"] == {0: "batch", 2: "frames"} and axes["wav"] == {0: "batch", 1: "samples"}
    grid = p.bucket_grid("acoustic_decode")  # phonemes pinned: batch x frames only
    assert len(grid) == len(p.batch.buckets) * len(p.frames.buckets) and "phonemes" not in grid[0]
    assert ShapeProfile.from_dict(p.to_dict()) == p


def test_axis_buckets() -> None:
    axis = AxisRange(2, 16, 256, (16, 64, 256))
    assert [axis.bucket(n) for n in (1, 16, 17, 256)] == [16, 16, 64, 256]
    with pytest.raises(InputError, match="split the input"):
        axis.bucket(257)
    with pytest.raises(ValueError, match="end at max"):
        AxisRange(1, 1, 100, (16, 64))
    with pytest.raises(InputError, match="unknown shape profile"):
        ShapeProfile.preset("huge")


def test_bucketed_engine_pads_into_static_buffers_and_cuts(bundle: ModelBundle) -> None:
    seen: list[tuple[int, ...]] = []

    def runner(mel: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(mel.shape))
        return bundle.vocoder(mel)

    profile = ShapeProfile.preset("ci")
    engine = CompiledEngine(
        "vocoder", "test", runner, CPU, torch.float32, profile, model_constants(bundle.vocoder), bucketed=True
    )
    mel = torch.randn(1, 80, 30) - 4.0
    (wav,) = engine(mel)
    assert seen[-1] == (2, 80, 64) or seen[-1] == (1, 80, 64)
    assert wav.shape == (1, 30 * 256)
    first = engine._buffers[(1, 2, 64, 64)][0] if (1, 2, 64, 64) in engine._buffers else None
    engine(torch.randn(1, 80, 40) - 4.0)
    if first is not None:  # the same bucket reuses the same buffer (a CUDA graph reads fixed addresses)
        assert engine._buffers[(1, 2, 64, 64)][0].data_ptr() == first.data_ptr()
    assert engine.warmup(repeats=1) >= 0 and engine.info["warmup_shapes"] == 4


def test_cache_key_changes_with_what_the_artifact_depends_on() -> None:
    profile = ShapeProfile.preset("ci")
    base = CacheKey.make("abc", "vocoder", "aoti", torch.float16, CPU, profile)
    assert base.digest() == CacheKey.make("abc", "vocoder", "aoti", torch.float16, CPU, profile).digest()
    others = [
        CacheKey.make("abd", "vocoder", "aoti", torch.float16, CPU, profile),
        CacheKey.make("abc", "acoustic_decode", "aoti", torch.float16, CPU, profile),
        CacheKey.make("abc", "vocoder", "onnx", torch.float16, CPU, profile),
        CacheKey.make("abc", "vocoder", "aoti", torch.bfloat16, CPU, profile),
        CacheKey.make("abc", "vocoder", "aoti", torch.float16, CPU, ShapeProfile.preset("default")),
    ]
    assert len({k.digest() for k in others} | {base.digest()}) == 6
    assert "torch" in runtime_versions() and runtime_versions()["torch"] in base.versions


def test_auto_falls_back_to_eager_with_a_warning(
    bundle: ModelBundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rtvox.engines.build as build

    monkeypatch.setitem(build.AUTO_ORDER, "cpu", (("tensorrt", torch.float32),))
    monkeypatch.setattr(build, "AUTO_ORDER_MODULE", {})
    monkeypatch.setenv("RTVOX_CPU_BF16", "0")
    monkeypatch.setitem(build.VERIFIED, "tensorrt", ("cpu",))
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path, warmup=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engines = build_engines(bundle, "auto", CPU, options=options, modules=("vocoder",))
    assert engines["vocoder"].backend == "eager"
    assert any("tensorrt build of vocoder failed" in str(w.message) for w in caught)


def test_parse_dtype() -> None:
    assert parse_dtype("bf16") is torch.bfloat16 and parse_dtype("int8") is torch.int8
    with pytest.raises(InputError):
        parse_dtype("fp8")


def test_one_options_object_builds_two_models_each_from_its_own_weights(tmp_path: Path) -> None:
    """The cache key's model hash is filled in per bundle: a BuildOptions shared by two models (as a benchmark of
    a teacher beside its student uses one) must not hand the second model the first one's compiled engine."""
    from rtvox.models.bundle import make_random_bundle
    from rtvox.text import Vocabulary

    vocab = Vocabulary.default().to_dict()
    first = make_random_bundle(tmp_path / "a", preset="tiny", vocab=vocab, seed=0)
    second = make_random_bundle(tmp_path / "b", preset="tiny", vocab=vocab, seed=1)
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path / "cache", warmup=False)
    mel = torch.randn(1, 80, 40)
    outs = []
    for bundle in (first, second):
        engines = build_engines(bundle, "onnx", CPU, options=options, modules=("vocoder",))
        (wav,) = engines["vocoder"](mel)
        with torch.inference_mode():
            eager = bundle.vocoder(mel)
        torch.testing.assert_close(wav, eager, atol=1e-4, rtol=1e-3)
        outs.append(wav)
    assert options.model_hash is None  # the caller's object is left as given
    assert not torch.allclose(outs[0], outs[1])
    assert len(list((tmp_path / "cache").glob("vocoder-onnx-*"))) == 2
