"""The fused frame-rate kernels (rtvox.engines.triton_frames) alone against the eager bf16 modules they replace,
on one serving-sized block input: [rows, frames, 256] bf16 (default 64 × 700, about a saturated step's decode
group), per tile setting; device time by CUDA events, achieved TFLOP/s beside the GEMMs' arithmetic.

    python3 benchmarks/probes/gpu_frame_kernels.py OUT_DIR [--rows 64 --frames 700 --tiles 64x64x8,32x64x4]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gpu_step_profile import _timed as timed  # this folder is the script's sys.path[0]
from torch import Tensor

from rtvox.engines import triton_frames as tf
from rtvox.models.layers import FFTBlock, masked_fill_zero
from rtvox.models.vocos import ConvNeXtBlock

REPEATS = 50


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--frames", type=int, default=700)
    parser.add_argument("--tiles", default="32x64x4x1,16x64x4x1,32x32x4x1,64x32x8x1,32x64x4x2,16x128x4x1")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run in Triton's interpreter (fp32)")
    parser.add_argument("--vocoder", type=Path, help="also time this model's whole vocoder at batch 1 (CUDA graphs)")
    parser.add_argument("--vocoder-frames", type=int, default=938, help="mel frames (938 = 10 s at 24 kHz, hop 256)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    dt = torch.bfloat16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(0)
    b, t, c, ffn_dim, mlp_dim = args.rows, args.frames, 256, 768, 768
    x = torch.randn(b, t, c, device=dev, dtype=dt)
    mask = torch.arange(t, device=dev)[None, :] < torch.randint(t // 2, t + 1, (b, 1), device=dev)
    fft = FFTBlock(c, 2, ffn_dim, (5, 1)).eval().to(dev, dt)
    nxt = ConvNeXtBlock(c, mlp_dim, 7, 0.125).eval().to(dev, dt)
    frames = b * t
    flops = {"decoder_ffn": frames * 2 * (c * ffn_dim * 5 + ffn_dim * c), "convnext_mlp": frames * 2 * 2 * c * mlp_dim}
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "shape": [b, t, c],
    }
    result["gflop"] = {k: v / 1e9 for k, v in flops.items()}
    with torch.inference_mode():
        h = fft.norm2(x)
        xc = x.transpose(1, 2).contiguous()  # ConvNeXt's eager layout [B, C, T]
        result["eager"] = {
            "decoder_ffn_block_part": timed(lambda: masked_fill_zero(x + fft.ffn(h, mask), mask), REPEATS),
            "convnext_block": timed(lambda: nxt(xc), REPEATS),
        }
        cublas = tf.FusedConvNeXt(nxt, mlp="cublas")  # dwconv+LN fused, the MLP as two cuBLAS(Lt) GEMMs
        result["convnext_cublas_mlp"] = {
            "ms": timed(lambda: cublas(x), REPEATS),
            "max_abs_diff_vs_eager_bf16": float((cublas(x).float() - nxt(xc).transpose(1, 2).float()).abs().max()),
        }
        print("convnext_cublas_mlp", json.dumps(result["convnext_cublas_mlp"]), flush=True)
        result["tiles"] = {}
        for spec in args.tiles.split(","):
            tf._TILES = tuple(int(v) for v in spec.split("x"))
            fused_fft, fused_nxt = tf.FusedFFTBlock(fft), tf.FusedConvNeXt(nxt, mlp="triton")
            entry: dict[str, Any] = {}
            try:
                ffn_ms = timed(
                    lambda f=fused_fft: tf.fused_ffn(h, f.w1, f.b1, f.w2, f.b2, x, mask, gelu=False),  # type: ignore[misc]
                    REPEATS,
                )
                dw_ms = timed(
                    lambda n=fused_nxt: tf.dwconv_layernorm(x, n.dw_weight, n.dw_bias, n.ln_weight, n.ln_bias, n.eps),  # type: ignore[misc]
                    REPEATS,
                )
                nxt_ms = timed(lambda n=fused_nxt: n(x), REPEATS)  # type: ignore[misc]
                want = masked_fill_zero(x + fft.ffn(h, mask), mask).float()
                err = float(
                    (
                        tf.fused_ffn(
                            h, fused_fft.w1, fused_fft.b1, fused_fft.w2, fused_fft.b2, x, mask, gelu=False
                        ).float()
                        - want
                    )
                    .abs()
                    .max()
                )
                want_n = nxt(xc).transpose(1, 2).float()
                err_n = float((fused_nxt(x).float() - want_n).abs().max())
                entry = {
                    "decoder_ffn_ms": ffn_ms,
                    "decoder_ffn_tflops": flops["decoder_ffn"] / max(ffn_ms, 1e-6) / 1e9,
                    "dwconv_ln_ms": dw_ms,
                    "convnext_block_ms": nxt_ms,
                    "convnext_mlp_tflops": flops["convnext_mlp"] / max(nxt_ms - dw_ms, 1e-6) / 1e9,
                    "ffn_max_abs_diff_vs_eager_bf16": err,
                    "convnext_max_abs_diff_vs_eager_bf16": err_n,
                }
            except Exception as exc:  # a tile that does not compile is reported, not fatal
                entry = {"error": repr(exc)[:500]}
            result["tiles"][spec] = entry
            print(spec, json.dumps(entry), flush=True)
    print("eager", json.dumps(result["eager"]), flush=True)
    if args.vocoder is not None:
        result["vocoder_batch1"] = vocoder_batch1(args.vocoder, args.vocoder_frames, dev, dt)
        print("vocoder_batch1", json.dumps(result["vocoder_batch1"]), flush=True)
    (args.out / "gpu_frame_kernels.json").write_text(json.dumps(result, indent=1))


def _graphed(fn: Callable[[], Tensor]) -> Callable[[], Tensor]:
    """fn captured in one CUDA graph (what the serving pipeline replays); eager on a CPU smoke run."""
    if not torch.cuda.is_available():
        return fn
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> Tensor:
        graph.replay()
        return out

    return replay


def vocoder_batch1(model: Path, frames: int, dev: torch.device, dt: torch.dtype) -> dict[str, Any]:
    """Issue 4's vocoder figure: one utterance's mel → audio, eager bf16 against the fused blocks, each as one
    CUDA graph, beside the arithmetic floor (FLOPs counted on the same shapes at 790 TFLOP/s)."""
    from torch.utils.flop_counter import FlopCounterMode

    from rtvox.models.bundle import ModelBundle

    vocoder = ModelBundle.load(model).vocoder.eval().to(dev, dt)
    mel = torch.randn(1, vocoder.config.n_mels, frames, device=dev, dtype=dt)
    fused = tf.FusedVocos(vocoder)
    counter = FlopCounterMode(display=False)
    with torch.inference_mode():
        with counter:
            vocoder(mel)
        gflop = counter.get_total_flops() / 1e9
        weight_mb = sum(p.numel() * p.element_size() for p in vocoder.parameters()) / 1e6
        floor_us = max(gflop / 790e3 * 1e6, weight_mb / 4.3e6 * 1e6)
        out: dict[str, Any] = {"frames": frames, "gflop": gflop, "weight_mb": weight_mb, "floor_us_h200": floor_us}
        for name, module in (("eager_bf16", vocoder), ("fused", fused)):
            run = _graphed(lambda m=module: m(mel))  # type: ignore[misc]
            ms = timed(run, REPEATS)
            out[name] = {"ms": ms, "x_floor": ms * 1e3 / floor_us}
        out["fused_max_abs_diff_vs_eager_bf16"] = float((fused(mel).float() - vocoder(mel).float()).abs().max())
    return out


if __name__ == "__main__":
    main()
