"""The fused frame-rate kernels (rtvox.engines.triton_frames) against the modules they replace, in Triton's
interpreter on the CPU (TRITON_INTERPRET=1 is set before triton is imported, so the checks run in a child
process); tests/gpu/test_engines_gpu.py runs them compiled in bf16 on a GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

SCRIPT = r"""
import sys, tempfile
from pathlib import Path
import torch
from rtvox.engines.triton_frames import (FusedFFTBlock, FusedVocos, fuse_frame_rate, fused_ffn, reference_ffn,
    dwconv_layernorm)
from rtvox.engines.pipeline import PipelineEngine
from rtvox.engines.quality import random_inputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import make_random_bundle
from rtvox.models.layers import FFTBlock
from rtvox.models.vocos import Vocos, VocosConfig
from rtvox.text import Vocabulary

torch.manual_seed(0)
B, T, C, I = 3, 70, 32, 128  # T: not a multiple of any tile; rows of 70, 41 and 5 real frames
x, r = torch.randn(B, T, C), torch.randn(B, T, C)
mask = torch.arange(T)[None, :] < torch.tensor([70, 41, 5])[:, None]
for k in (1, 5):
    w1, b1 = torch.randn(k, C, I) * 0.2, torch.randn(I) * 0.1
    w2, b2 = torch.randn(I, C) * 0.1, torch.randn(C) * 0.1
    for m in (None, mask):
        for gelu in (True, False):
            got = fused_ffn(x, w1, b1, w2, b2, r, m, gelu=gelu)
            want = reference_ffn(x, w1, b1, w2, b2, r, m, gelu=gelu)
            assert (got - want).abs().max() < 1e-4, ("ffn", k, gelu, (got - want).abs().max())
            if m is not None:
                assert not got[~m].any()  # masked rows are exactly zero
w, b, g, beta = torch.randn(C, 7), torch.randn(C), torch.randn(C), torch.randn(C)
conv = torch.nn.functional.conv1d(x.transpose(1, 2), w[:, None, :], b, padding=3, groups=C).transpose(1, 2)
want = torch.nn.functional.layer_norm(conv, (C,), g, beta, 1e-6)
assert (dwconv_layernorm(x, w, b, g, beta, 1e-6) - want).abs().max() < 1e-4

voc = Vocos(VocosConfig.preset("tiny", dim=32, intermediate_dim=64)).eval()
with torch.no_grad():
    for p in voc.parameters():
        p.normal_(0, 0.3 if p.dim() > 1 else 0.1)  # large enough that every block matters
    mel = torch.randn(2, 80, 45)
    diff = (FusedVocos(voc)(mel) - voc(mel)).abs().max()
    assert diff < 1e-4, ("vocos", diff)
    diff = (FusedVocos(voc, mlp="cublas")(mel) - voc(mel)).abs().max()  # the MLP as two library GEMMs
    assert diff < 1e-4, ("vocos cublas", diff)
    block = FFTBlock(C, 2, I, (5, 1)).eval()
    for p in block.parameters():
        p.add_(torch.randn_like(p) * 0.1)
    diff = (FusedFFTBlock(block)(x, mask) - block(x, mask)).abs().max()
    assert diff < 1e-4, ("fft block", diff)
    # a width the kernels cannot take is left alone
    odd = Vocos(VocosConfig.preset("tiny", dim=24, intermediate_dim=64))
    kept, fused = fuse_frame_rate(torch.nn.Module(), odd)
    assert kept is odd and fused == []
    ragged = Vocos(VocosConfig.preset("tiny", dim=32, intermediate_dim=40))  # hidden not a multiple of the tile
    kept, fused = fuse_frame_rate(torch.nn.Module(), ragged)
    assert kept is ragged and fused == []

# the whole pipeline, fused against unfused (fp32): same frame counts, same audio
vocab = Vocabulary.default().to_dict()
bundle = make_random_bundle(Path(tempfile.mkdtemp()) / "mini", preset="mini", vocab=vocab, seed=0)
with torch.no_grad():
    bundle.acoustic.variance.duration.head.bias.fill_(1.3)
cfg = bundle.config.acoustic
inputs = random_inputs([9, 30], cfg.cond_dim, cfg.vocab_size, [0, 0], seed=3)
cpu = torch.device("cpu")
plain = PipelineEngine(bundle, cpu, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None)
fast = PipelineEngine(bundle, cpu, ShapeProfile.preset("ci"), dtype=torch.float32, compile_mode=None, fused_frames=True)
assert fast.info["fused_frames"] == ["vocos_blocks"], fast.info
fast.vocoder, fused = fuse_frame_rate(fast.decoder, fast.vocoder, decoder_ffn=True)  # the decoder too
assert fused == ["decoder_ffn"], fused
wav, frames = plain(inputs)
wav2, frames2 = fast(inputs)
assert torch.equal(frames, frames2)
assert (wav - wav2).abs().max() < 1e-4, (wav - wav2).abs().max()
print("OK")
"""


def test_fused_frame_kernels_match_pytorch_in_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
