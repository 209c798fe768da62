"""The fused Triton vocoder kernels against PyTorch, in Triton's interpreter on the CPU (TRITON_INTERPRET=1 is
set before triton is imported); on the H200 tests/gpu/test_engines_gpu.py runs them compiled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

SCRIPT = r"""
import torch
from rtvox.engines.triton_vocoder import FusedHiFiGAN, fused_conv1d
from rtvox.models.vocoder import HiFiGAN, VocoderConfig
torch.manual_seed(0)
conv = torch.nn.Conv1d(24, 20, 3, dilation=3, padding=3)
x, r = torch.randn(2, 24, 50), torch.randn(2, 20, 50)
with torch.no_grad():
    want = (conv(torch.nn.functional.leaky_relu(x, 0.1)) + r) * 0.5
    got = fused_conv1d(x, conv, pre_slope=0.1, residual=r, out_scale=0.5)
    assert (got - want).abs().max() < 1e-5, (got - want).abs().max()
    vocoder = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    for m in vocoder.modules():
        if isinstance(m, torch.nn.Conv1d):
            torch.nn.init.normal_(m.weight, 0, 0.3)  # large enough that every block matters
    mel = torch.randn(1, 80, 5)
    diff = (FusedHiFiGAN(vocoder)(mel) - vocoder(mel)).abs().max()
    assert diff < 1e-5, diff
print("OK")
"""


def test_fused_kernels_match_pytorch_in_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]
