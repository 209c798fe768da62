"""The TensorRT backend is UNVERIFIED: TensorRT is not installable in our environment. These tests run only
where `tensorrt` and a CUDA GPU exist; here they check that its absence gives a clear error."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rtvox.engines import build_engine
from rtvox.engines.base import BuildOptions
from rtvox.engines.shapes import ShapeProfile
from rtvox.errors import ModelError
from rtvox.models.bundle import ModelBundle

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None and torch.cuda.is_available()


@pytest.mark.skipif(HAVE_TRT, reason="tensorrt is installed")
def test_missing_tensorrt_says_what_to_do(bundle: ModelBundle) -> None:
    with pytest.raises(ModelError, match="needs NVIDIA TensorRT"):
        build_engine("tensorrt", "vocoder", bundle.vocoder, torch.device("cpu"), torch.float16)


@pytest.mark.skipif(not HAVE_TRT, reason="unverified backend: needs tensorrt and a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_tensorrt_vocoder_matches_eager(
    bundle: ModelBundle, dtype: torch.dtype, tmp_path_factory: pytest.TempPathFactory
) -> None:
    device = torch.device("cuda")
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path_factory.mktemp("trt"))
    engine = build_engine("tensorrt", "vocoder", bundle.vocoder, device, dtype, options)
    mel = torch.randn(2, 80, 100) - 4.0
    (wav,) = engine(mel.to(device))
    with torch.no_grad():
        ref = bundle.vocoder(mel)
    torch.testing.assert_close(wav.cpu(), ref, rtol=0, atol=1e-3 if dtype == torch.float32 else 2e-2)
