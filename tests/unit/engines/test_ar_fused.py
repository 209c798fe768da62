"""The fused AR decode kernels (rtvox.engines.ar_fused) against the model's paged forward, in Triton's interpreter
on the CPU (TRITON_INTERPRET=1 is set before triton is imported, so each check runs in a child process); on the
H200 tests/gpu/test_ar_serving_gpu.py runs them compiled in bf16."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

PARITY = r"""
import torch
from rtvox.models.ar import ARConfig, ARDecoder, PagedKVCache
from rtvox.engines.ar_fused import FusedDecode
torch.manual_seed(0)
cfg = ARConfig.preset("tiny", dim=64, heads=4, layers=3)
model = ARDecoder(cfg).eval()
for p in model.parameters():  # large enough that every layer, bias and norm moves the logits
    torch.nn.init.normal_(p, 0, 0.2)
bs = 4
cases = {  # batch -> block tables (any order of blocks), positions (0 = nothing cached yet), last codes
    1: ([[5, 2, 9, 11]], [13], [3]),
    3: ([[5, 2, 9, 11], [1, 0, 3, 4], [7, 8, 6, 10]], [13, 6, 0], [3, 7, 1]),
}
from rtvox.engines import ar_fused
configs = [  # the default tiles (whole rows at batch 1), then tiles smaller than a row: K in a loop, split K
    (ar_fused.GEMV_TILE, ar_fused.MAX_ROW_TILE),
    ((8, 32, 4), 32),
]
for (tile, row_tile), (batch, case) in [(c, b) for c in configs for b in cases.items()]:
    ar_fused.GEMV_TILE, ar_fused.MAX_ROW_TILE = tile, row_tile
    tables, positions, codes = (torch.tensor(c) for c in case)
    positions, codes = positions[:, None], codes[:, None]
    ref = PagedKVCache(cfg, 20, bs, torch.device("cpu"), torch.float32)
    ref.k.normal_(); ref.v.normal_()
    fused = PagedKVCache(cfg, 20, bs, torch.device("cpu"), torch.float32)
    fused.k.copy_(ref.k); fused.v.copy_(ref.v)
    with torch.no_grad():
        want = model.forward_paged(model.code_embeddings(codes), positions, ref, tables)
        got = FusedDecode(model, fused)(codes, positions, tables)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert want.abs().max() > 0.5  # the logits are not trivially small
    assert (got - want).abs().max() < 1e-4, (batch, (got - want).abs().max())
    # the new keys and values landed in the same slots; nothing else moved
    assert (fused.k - ref.k).abs().max() < 1e-4 and (fused.v - ref.v).abs().max() < 1e-4
    # a wrong slot or a skipped cached position must show: drop position 0's key and the logits move
    fused.k[:, tables[0, 0], 0] += 3.0
    with torch.no_grad():
        moved = FusedDecode(model, fused)(codes, positions, tables)
    assert (moved[0] - want[0]).abs().max() > 1e-3
print("OK")
"""

ENGINE = r"""
import torch
from rtvox.models.ar import ARConfig, ARDecoder
from rtvox.models.sampling import SamplingParams
from rtvox.runtime.ar import ARDecodeEngine, ARRequest
torch.manual_seed(1)
cfg = ARConfig.preset("tiny", dim=64, heads=4, layers=2)
model = ARDecoder(cfg).eval()
def run(kernels):
    engine = ARDecodeEngine(model, num_blocks=40, block_size=4, max_batch=4, static=True, kernels=kernels)
    reqs = [
        ARRequest(f"r{i}", [1 + i, 5, 9, 2 + i][: 2 + i], [0.1 * i] * cfg.cond_dim, token_count=6 + i,
                  sampling=SamplingParams(temperature=0.9, top_k=8, seed=i))
        for i in range(3)
    ]
    return engine.generate(reqs)
torch_out, fused_out = run("torch"), run("triton")
assert torch_out == fused_out, (torch_out, fused_out)
assert [len(v) for v in fused_out.values()] == [6, 7, 8]
print("OK")
"""


def _run(script: str) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


def test_fused_decode_matches_the_paged_forward_in_the_interpreter() -> None:
    _run(PARITY)


@pytest.mark.parametrize("advances", [0, 4], ids=["codes", "phoneme-pointer"])
def test_engine_with_fused_kernels_samples_the_same_tokens_as_with_torch_kernels(advances: int) -> None:
    # a phoneme-pointer model's pointer embeddings reach the fused kernels as the embedding's `extra` input
    _run(ENGINE.replace("layers=2)", f"layers=2, advances={advances})"))


def test_fused_kernels_refuse_what_they_cannot_run() -> None:
    import torch

    from rtvox.engines.ar_fused import FusedDecode
    from rtvox.errors import ModelError
    from rtvox.models.ar import ARConfig, ARDecoder, PagedKVCache
    from rtvox.runtime.ar import StaticDecodeStep

    model = ARDecoder(ARConfig.preset("tiny", dim=48, heads=4))  # head size 12
    cache = PagedKVCache(model.config, 4, 4, torch.device("cpu"), torch.float32)
    with pytest.raises(ModelError, match="power-of-two head size"):
        FusedDecode(model, cache)
    with pytest.raises(ValueError, match="kernels must be"):
        StaticDecodeStep(model, cache, kernels="cuda")
    with pytest.raises(ValueError, match="leave compile_mode None"):
        StaticDecodeStep(model, cache, compile_mode="default", kernels="triton")


def test_kernels_compile_for_hopper_without_a_gpu() -> None:
    """The interpreter does not type-check like the compiler does (it ran a loop-carried int32/int64 mix that
    sm_90 compilation rejects): compile every kernel variant the decode step launches for sm_90, with and without
    programmatic dependent launch, through the wheel's own ptxas."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from rtvox.engines import ar_fused

    target = GPUTarget("cuda", 90, 32)

    def build(fn: object, sig: dict[str, str], consts: dict[str, object]) -> None:
        sig = {**sig, **{name: "constexpr" for name in consts}}
        kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target)
        assert ".entry" in kernel.asm["ptx"]

    for pdl in (False, True):
        build(
            ar_fused._paged_attention,
            {"qkv_ptr": "*bf16", "k_cache_ptr": "*bf16", "v_cache_ptr": "*bf16", "tables_ptr": "*i64",
             "pos_ptr": "*i64", "out_ptr": "*bf16", "W": "i32", "scale": "fp32"},
            {"H": 16, "DH": 64, "BS": 16, "BLOCK_T": 128, "PDL": pdl},
        )  # fmt: skip
        tiles = ((1, 8, 1024, 1, True), (1, 8, 512, 4, False), (16, 32, 128, 1, True), (16, 32, 128, 8, False))
        for block_b, block_n, block_k, split, ln in tiles:
            sig = {n: "*bf16" for n in ("base_ptr", "part_ptr", "bias_in_ptr", "xout_ptr", "ln_w_ptr", "ln_b_ptr")}
            sig |= {"part_ptr": "*fp32", "xout_ptr": "*fp32", "w_ptr": "*bf16", "b_ptr": "*bf16"}
            sig |= {"out_ptr": "*fp32" if split > 1 else "*bf16", "B": "i32", "N": "i32", "K": "i32"}
            sig |= {"k_per_split": "i32", "eps": "fp32"}
            consts: dict[str, object] = dict(
                NUM_PARTS=4 if ln else 0, HAS_BIAS_IN=ln, WRITE_X=ln, HAS_LN=ln, HAS_BIAS=split == 1, GELU=ln,
                SPLIT_K=split, BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_K=block_k, ONE_TILE=ln and block_b == 1,
                PDL=pdl,
            )  # fmt: skip
            build(ar_fused._linear, sig, consts)
    for has_extra in (False, True):
        build(
            ar_fused._embed,
            {"codes_ptr": "*i64", "pos_ptr": "*i64", "code_emb_ptr": "*bf16", "pos_emb_ptr": "*bf16",
             "extra_ptr": "*fp32", "out_ptr": "*fp32", "D": "i32"},
            {"BLOCK_D": 1024, "HAS_EXTRA": has_extra},
        )  # fmt: skip


def test_the_chunk_step_takes_the_fused_kernels_only_where_they_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from rtvox.runtime.ar_steps import fused_kernels_available

    assert not fused_kernels_available(torch.device("cpu"), 64)  # CUDA only
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert fused_kernels_available(cuda, 64)
    assert not fused_kernels_available(cuda, 48)  # head size not a power of two
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert not fused_kernels_available(cuda, 64)  # no bf16 tensor cores
