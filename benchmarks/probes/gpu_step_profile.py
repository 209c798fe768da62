"""Where a serving step's GPU time goes: the graphs backend's programs run uncaptured (eager kernels, bf16
frame-rate half) on `--rows` later chunks of the load bench's texts, grouped by length as `PipelineEngine.run_rows`
groups them. Per module (encode / decoder / vocoder) device time by CUDA events, the top CUDA kernels by
torch.profiler, and the same step under a few kernel variants (cuDNN autotuning, the depthwise conv as a 2-D
channels-last conv, the attention mask broadcast instead of expanded); then the captured step itself.
Results to stdout and OUT/gpu_step_profile.json.

    python3 benchmarks/probes/gpu_step_profile.py OUT_DIR --model models/rtvox-small --rows 64
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from rtvox.engines.pipeline import PipelineEngine, _arrays, _Staging, plan_decode_groups
from rtvox.engines.quality import PipelineInputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.models import layers, vocos
from rtvox.runtime.loadbench import make_texts
from rtvox.runtime.steps import encode_inputs
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest


def _timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median device+host ms of fn() over `repeats` calls (after two warm-ups), synchronized."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        if not torch.cuda.is_available():  # a CPU smoke run of the script
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000.0)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


@contextlib.contextmanager
def _variant(name: str) -> Iterator[None]:
    """Kernel variants by monkeypatching, for timing only (numerics of each are checked against baseline)."""
    saved_block = vocos.ConvNeXtBlock.forward
    saved_attn = layers.SelfAttention.forward
    saved_bench = torch.backends.cudnn.benchmark
    if name == "cudnn-benchmark":
        torch.backends.cudnn.benchmark = True
    if name == "dwconv-2d-nhwc":

        def block(self: vocos.ConvNeXtBlock, x: Tensor) -> Tensor:
            w = self.dwconv.weight[:, :, None, :]  # [C, 1, 1, K]
            x4 = x[:, :, None, :].contiguous(memory_format=torch.channels_last)
            h = F.conv2d(x4, w, self.dwconv.bias, padding=(0, w.shape[-1] // 2), groups=w.shape[0])
            h = h[:, :, 0, :].transpose(1, 2)
            h = self.pw2(F.gelu(self.pw1(self.norm(h))))
            return x + (self.gamma * h).transpose(1, 2)

        vocos.ConvNeXtBlock.forward = block  # type: ignore[method-assign]
    if name == "attn-mask-broadcast":

        def attn(self: layers.SelfAttention, x: Tensor, mask: Tensor) -> Tensor:
            b, n, d = x.shape
            qkv = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask[:, None, None, :])
            return self.out(y.transpose(1, 2).reshape(b, n, d))

        layers.SelfAttention.forward = attn  # type: ignore[method-assign]
    try:
        yield
    finally:
        vocos.ConvNeXtBlock.forward = saved_block  # type: ignore[method-assign]
        layers.SelfAttention.forward = saved_attn  # type: ignore[method-assign]
        torch.backends.cudnn.benchmark = saved_bench


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="models/rtvox-small")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself")
    parser.add_argument(
        "--variants", default="baseline,cudnn-benchmark,dwconv-2d-nhwc,attn-mask-broadcast", help="comma list"
    )
    parser.add_argument("--fused", action="store_true", help="the fused Triton frame kernels (triton_frames)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    synth = Synthesizer(args.model, device="cpu", backend="eager")
    prepared = [synth.prepare(SynthesisRequest(text=t.text)) for t in make_texts(256, 0)]
    later = [(p, i) for p in prepared for i in range(1, len(p.chunks))][: args.rows]
    rows = [(p.chunks[i].ids, p.cond, p.request, 0, p.prosody, p.chunks[i].rate) for p, i in later]
    inputs = PipelineInputs(*encode_inputs(rows, torch.device("cpu")))
    dev = torch.device(args.device)
    engine = PipelineEngine(synth.bundle, dev, ShapeProfile.preset("serve"), compile_mode=None, fused_frames=args.fused)
    prof_axes = engine.profile
    arrays = _arrays(inputs, None)
    batch = prof_axes.batch.bucket(arrays[0].shape[0])
    phon = prof_axes.phonemes.bucket(arrays[0].shape[1])
    staging = _Staging(arrays, batch, phon, dev)  # the inputs padded as the service pads them
    staging.write(arrays)
    static = staging.inputs[:-1]
    result: dict[str, Any] = {"torch": torch.__version__, "device": args.device, "rows": len(rows), "fused": args.fused}
    with torch.inference_mode():
        hidden, durations = engine._encode_fn(*static)
        lengths = [int(n) + engine.end_frames for n in durations[: len(rows)].sum(1).tolist()]
        groups = plan_decode_groups(lengths, prof_axes.batch, prof_axes.frames, engine.group_launch_cost)
        plan = []
        for group in groups:
            size = prof_axes.batch.bucket(len(group))
            index = torch.tensor(group + [group[0]] * (size - len(group)), device=dev)
            frames = prof_axes.frames.bucket(lengths[group[-1]])
            h, d = hidden.index_select(0, index), durations.index_select(0, index)
            mask = torch.arange(frames, device=dev)[None, :] < d.sum(1, keepdim=True)
            plan.append((h, d, mask, frames))
        result["audio_s"] = sum(lengths) * 256 / 24000
        result["groups"] = [{"rows": int(h.shape[0]), "frames": f} for h, _, _, f in plan]
        result["real_frames"] = sum(lengths)
        result["padded_row_frames"] = sum(int(h.shape[0]) * f for h, _, _, f in plan)
        # mels per group once (for the vocoder-alone timing)
        mels = [engine.decoder.decode_masked(h, d, m) for h, d, m, _ in plan]
        reference = [engine.vocoder(m).float() for m in mels]

        def encode() -> None:
            engine._encode_fn(*static)

        def decoder() -> None:
            for h, d, m, _ in plan:
                engine.decoder.decode_masked(h, d, m)

        def vocoder() -> None:
            for m in mels:
                engine.vocoder(m)

        def step() -> None:
            encode()
            for h, d, m, _ in plan:
                engine.vocoder(engine.decoder.decode_masked(h, d, m))

        variants: dict[str, Any] = {}
        for name in args.variants.split(","):
            with _variant(name):
                mel_err = max(
                    float((engine.decoder.decode_masked(h, d, m) - ref).abs().max())
                    for (h, d, m, _), ref in zip(plan, mels, strict=True)
                )
                wav_err = max(
                    float((engine.vocoder(m).float() - ref).abs().max()) for m, ref in zip(mels, reference, strict=True)
                )
                variants[name] = {
                    "encode_ms": _timed(encode, args.repeats),
                    "decoder_ms": _timed(decoder, args.repeats),
                    "vocoder_ms": _timed(vocoder, args.repeats),
                    "step_ms": _timed(step, args.repeats),
                    "mel_max_abs_diff": mel_err,
                    "wav_max_abs_diff": wav_err,
                }
            print(name, json.dumps(variants[name]), flush=True)
        result["variants"] = variants
        activity = ProfilerActivity.CUDA if dev.type == "cuda" else ProfilerActivity.CPU
        with profile(activities=[activity]) as prof:
            for _ in range(3):
                step()
            if dev.type == "cuda":
                torch.cuda.synchronize()

    def busy(e: Any) -> float:
        return float(e.device_time_total if dev.type == "cuda" else e.self_cpu_time_total)

    events = sorted(prof.key_averages(), key=lambda e: -busy(e))[:30]
    result["top_kernels"] = [
        {"name": e.key[:140], "ms_per_step": round(busy(e) / 3 / 1000, 3), "calls": e.count / 3} for e in events
    ]
    for k in result["top_kernels"][:20]:
        print(f"{k['ms_per_step']:8.3f} ms  x{k['calls']:5.0f}  {k['name']}")
    # the captured step as the service runs it
    with torch.inference_mode():
        engine.run_rows(inputs)
        result["captured_run_rows_ms"] = _timed(lambda: engine.run_rows(inputs), args.repeats)
        engine.launch_rows(arrays)()
        result["captured_launch_rows_ms"] = _timed(lambda: engine.launch_rows(arrays)(), args.repeats)
    print("captured run_rows", result["captured_run_rows_ms"], "launch_rows", result["captured_launch_rows_ms"])
    print("audio_s", result["audio_s"], "groups", result["groups"], flush=True)
    (args.out / "gpu_step_profile.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
