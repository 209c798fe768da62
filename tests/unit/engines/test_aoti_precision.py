"""Which precision each aoti package is built in: a half-precision request keeps the acoustic encoder fp32.

The compiler is stubbed (the exported program stands in for the package), so this checks what gets exported,
keyed and cast in seconds; test_parity_cpu.py compiles real packages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from rtvox.engines import aoti
from rtvox.engines.aoti import FP32_PACKAGES_OPTION, package_dtype
from rtvox.engines.base import BuildOptions
from rtvox.engines.build import build_engines
from rtvox.engines.quality import random_inputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle

from .conftest import CPU


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Package path -> the ExportedProgram `build_aoti_engine` handed the compiler; loading runs that program."""
    programs: dict[str, Any] = {}

    def compile_and_package(program: Any, package_path: str, inductor_configs: Any = None) -> str:
        programs[package_path] = program
        Path(package_path).write_bytes(b"stub")
        return package_path

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_and_package)
    monkeypatch.setattr(aoti, "_load", lambda path, package, device: programs[str(package)].module())
    monkeypatch.setattr(aoti, "needs_safe_load", lambda device, version=None: False)
    return programs


def _float_dtypes(program: Any) -> set[torch.dtype]:
    return {t.dtype for t in program.state_dict.values() if t.is_floating_point()}


def _options(tmp_path: Path, **extra: Any) -> BuildOptions:
    return BuildOptions(
        profile=ShapeProfile.preset("ci"), cache_dir=tmp_path, model_hash="split", warmup=False, extra=extra
    )


def test_package_dtype_keeps_only_the_encoder_fp32_at_half_precision() -> None:
    options = BuildOptions()
    for half in (torch.bfloat16, torch.float16):
        assert package_dtype("acoustic_encode", half, options) == torch.float32
        assert package_dtype("acoustic_decode", half, options) == half
        assert package_dtype("vocoder", half, options) == half
    assert package_dtype("acoustic_encode", torch.float32, options) == torch.float32
    off = BuildOptions(extra={FP32_PACKAGES_OPTION: False})
    assert package_dtype("acoustic_encode", torch.bfloat16, off) == torch.bfloat16


def test_bf16_aoti_builds_an_fp32_encoder_package_keyed_as_fp32(
    bundle: ModelBundle, tmp_path: Path, exported: dict[str, Any]
) -> None:
    engines = build_engines(bundle, "aoti", CPU, torch.bfloat16, options=_options(tmp_path))
    encode, decode = engines["acoustic_encode"], engines["acoustic_decode"]
    encode_pkg = Path(encode.info["package"])  # type: ignore[attr-defined]
    decode_pkg = Path(decode.info["package"])  # type: ignore[attr-defined]
    assert _float_dtypes(exported[str(encode_pkg)]) == {torch.float32}
    assert torch.bfloat16 in _float_dtypes(exported[str(decode_pkg)])
    assert torch.bfloat16 in _float_dtypes(exported[str(Path(engines["vocoder"].info["package"]))])  # type: ignore[attr-defined]
    # The engine answers for the bf16 request and computes in fp32.
    assert encode.dtype == torch.bfloat16 and encode.compute_dtype == torch.float32  # type: ignore[attr-defined]
    assert encode.info["compute_dtype"] == "float32" and decode.info["compute_dtype"] == "bfloat16"  # type: ignore[attr-defined]
    # The cache key names the dtype the package is built in.
    assert encode_pkg.parent.name.startswith("acoustic_encode-aoti-float32-")
    assert json.loads((encode_pkg.parent / "meta.json").read_text())["dtype"] == "float32"
    assert decode_pkg.parent.name.startswith("acoustic_decode-aoti-bfloat16-")
    # ... so an fp32 request finds that package instead of building another.
    count = len(exported)
    fp32 = build_engines(bundle, "aoti", CPU, torch.float32, ("acoustic_encode",), _options(tmp_path))
    assert fp32["acoustic_encode"].info["package"] == str(encode_pkg) and len(exported) == count  # type: ignore[attr-defined]
    # fp32 arithmetic end to end: the durations are eager fp32's exactly.
    cfg = bundle.config.acoustic
    inputs = random_inputs([9, 60], cfg.cond_dim, cfg.vocab_size, [70, 250], seed=3).tensors(CPU)
    eager = build_engines(bundle, "eager", CPU, modules=("acoustic_encode",))["acoustic_encode"]
    hidden, durations = eager(*inputs)
    got_hidden, got_durations = encode(*inputs)
    assert torch.equal(got_durations, durations)
    torch.testing.assert_close(got_hidden, hidden, rtol=0, atol=1e-4)


def test_the_split_can_be_turned_off(bundle: ModelBundle, tmp_path: Path, exported: dict[str, Any]) -> None:
    options = _options(tmp_path, **{FP32_PACKAGES_OPTION: False})
    engines = build_engines(bundle, "aoti", CPU, torch.bfloat16, ("acoustic_encode",), options)
    package = Path(engines["acoustic_encode"].info["package"])  # type: ignore[attr-defined]
    assert package.parent.name.startswith("acoustic_encode-aoti-bfloat16-")
    assert torch.bfloat16 in _float_dtypes(exported[str(package)])
