"""The reference-size vocoder (HiFi-GAN V1, random weights) alone: eager fp32, eager bf16, torch.compile bf16
with CUDA graphs, and the fused Triton residual-block kernels (bf16, whole forward in one CUDA graph); latency,
log-mel L1 against eager fp32 and distance from the H200 roofline floor. Called by gpu_engines.py (step 5):
    python benchmarks/vocoder_kernels_bench.py [--smoke]
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from rtvox.constants import FRAMES_PER_SECOND, N_MELS
from rtvox.engines.bench import latency_stats
from rtvox.engines.quality import log_mel_l1
from rtvox.engines.roofline import H200, module_cost
from rtvox.models.vocoder import HiFiGAN, VocoderConfig


def _time(fn: Callable[[], torch.Tensor], device: torch.device, repeats: int) -> dict[str, float]:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return latency_stats(times)


def _graphed(fn: Callable[[torch.Tensor], torch.Tensor], example: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The whole forward captured as one CUDA graph (static input/output): no per-kernel launch cost."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn(example)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(example)

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def bench_vocoder(
    device: torch.device, seconds: float, repeats: int, smoke: bool = False, autotune: bool = True
) -> dict[str, Any]:
    torch.manual_seed(0)
    preset = "tiny" if smoke else "v1"
    fp32 = HiFiGAN(VocoderConfig.preset(preset)).eval().to(device)
    frames = round(seconds * FRAMES_PER_SECOND)
    mel = torch.randn(1, N_MELS, frames, device=device) - 4.0
    out: dict[str, Any] = {"preset": preset, "frames": frames, "variants": {}}
    cost = module_cost("vocoder", fp32, (mel,), seconds)
    floor_ms = cost.floor_s(H200) * 1e3
    out["cost"] = cost.to_dict(H200)
    with torch.inference_mode():
        reference = fp32(mel)
    low = torch.bfloat16 if device.type == "cuda" else torch.float32
    half = copy.deepcopy(fp32).to(low)
    mel_low = mel.to(low)
    candidates: dict[str, Callable[[], Callable[[], torch.Tensor]]] = {
        "eager-fp32": lambda: lambda: fp32(mel),
        "eager-bf16": lambda: lambda: half(mel_low),
    }
    if device.type == "cuda":
        compiled = torch.compile(half, mode="reduce-overhead", fullgraph=True, dynamic=False)
        candidates["inductor-bf16"] = lambda: lambda: compiled(mel_low)
        if autotune:
            compiled_at = torch.compile(half, mode="max-autotune", fullgraph=True, dynamic=False)
            candidates["inductor-bf16-max-autotune"] = lambda: lambda: compiled_at(mel_low)

        def fused() -> Callable[[], torch.Tensor]:
            from rtvox.engines.triton_vocoder import FusedHiFiGAN

            return _graphed(FusedHiFiGAN(half), mel_low)

        candidates["triton-fused-bf16"] = fused
    for name, make in candidates.items():
        try:
            with torch.inference_mode():
                t0 = time.perf_counter()
                fn = make()
                wav = fn().float()
                build_s = time.perf_counter() - t0
                stats = _time(fn, device, repeats)
            out["variants"][name] = {
                **stats,
                "build_s": round(build_s, 1),
                "log_mel_l1_vs_eager_fp32": log_mel_l1(wav, reference),
                "x_roofline_floor": stats["mean_ms"] / floor_ms,
            }
        except Exception as exc:  # record and go on with the next variant
            out["variants"][name] = {"error": repr(exc)[:600]}
    return out


if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    smoke = "--smoke" in sys.argv or dev.type == "cpu"
    print(json.dumps(bench_vocoder(dev, 1.0 if smoke else 10.0, 3 if smoke else 30, smoke), indent=1))
