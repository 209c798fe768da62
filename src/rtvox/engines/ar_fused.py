"""Fused Triton kernels for the AR family's decode step (one new token per sequence, batch ≤ 16).

The step as written launches ~15 kernels per layer (norm, QKV GEMM, two cache writes, two block gathers, mask,
SDPA, output GEMM, residual, norm, two FFN GEMMs, GELU, residual); at batch 1 each costs a few µs even inside a
CUDA graph while the layer's weights would stream in about one. Here a layer is five launches:

1. `_linear` with LayerNorm: the residual stream of the layer is assembled in the prologue (the previous
   layer's stream + the split-K partial sums of its FFN down projection + that projection's bias), normalized,
   and multiplied by W_qkv (+ bias); the first program stores the assembled stream for the residual adds after.
2. `_paged_attention`: per (sequence, head), writes the new token's key and value into its cache slot and
   attends over the sequence's cached positions, reading the blocks in place through the block table (online
   softmax, fp32), never gathering them into a dense copy.
3. `_linear` split-K: the output projection's partial sums, no epilogue.
4. `_linear` with LayerNorm: stream + projection partials + bias → LayerNorm → W_up + bias → exact GELU.
5. `_linear` split-K: the FFN down projection's partial sums, folded into the next layer's prologue (or into
   the head's).

Split-K partials go to separate fp32 buffers and are summed in a fixed order by the consumer, so the step is
deterministic (no atomics) and a row's result does not depend on its batch neighbours. The residual stream is
kept in fp32 (the eager bf16 model rounds it to bf16 after every add), so logits agree with eager to bf16
rounding, not bit for bit.

Runs on CUDA; with TRITON_INTERPRET=1 set before triton is imported the same kernels run on the CPU in Triton's
interpreter, which is how the unit tests check them against the eager forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rtvox.errors import ModelError
from rtvox.models.ar import ARDecoder, Block, PagedKVCache

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - the CPU install has no triton
    HAVE_TRITON = False

HAVE_GDC = False  # grid dependency control (programmatic dependent launch), Triton >= 3.4 on Hopper
if HAVE_TRITON:
    try:
        from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

        HAVE_GDC = True
    except ImportError:  # pragma: no cover - an older Triton: the kernels run without PDL

        @triton.jit
        def gdc_wait() -> None:
            pass

        @triton.jit
        def gdc_launch_dependents() -> None:
            pass


MAX_FUSED_BATCH = 16  # one tile of rows for the tensor-core path; larger decode batches use cuBLAS GEMMs
DEFAULT_SMS = 132  # H100/H200; the interpreter has no device to ask
# (block_n, largest block_k, num_warps) of `_linear`: batch 1 (CUDA-core GEMV: a program's whole K range in one
# tile up to this size, so all its weights are requested before it waits for the kernel before) and batches 2-16
# (tensor cores, 16 rows)
GEMV_TILE = (8, 1024, 8)
DOT_TILE = (32, 128, 4)
MAX_ROW_TILE = 2048  # widest row a LayerNorm prologue reads in one tile (wider models loop over K)


if HAVE_TRITON:

    @triton.jit
    def _load_stream(  # type: ignore[no-untyped-def]
        base_ptr, part_ptr, bias_in_ptr, rows, k, mask, B, K, NUM_PARTS: tl.constexpr, HAS_BIAS_IN: tl.constexpr
    ):
        # x[rows, k] = base + Σ_s parts[s] + bias_in, in fp32 (rows [R, 1], k [1, C])
        x = tl.load(base_ptr + rows * K + k, mask=mask, other=0.0).to(tl.float32)
        for s in tl.static_range(NUM_PARTS):
            x += tl.load(part_ptr + (s * B + rows) * K + k, mask=mask, other=0.0)
        if HAS_BIAS_IN:
            x += tl.load(bias_in_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        return x

    @triton.jit
    def _input_tile(  # type: ignore[no-untyped-def]
        base_ptr, part_ptr, bias_in_ptr, ln_w_ptr, ln_b_ptr, rows, row_ok, k, k_ok, mean, rstd, B, K,
        NUM_PARTS: tl.constexpr, HAS_BIAS_IN: tl.constexpr, HAS_LN: tl.constexpr,
    ):  # fmt: skip
        # the input tile x[rows, k] as the Linear sees it: the assembled stream, normalized when HAS_LN
        m = row_ok & k_ok
        x = _load_stream(base_ptr, part_ptr, bias_in_ptr, rows, k, m, B, K, NUM_PARTS, HAS_BIAS_IN)
        if HAS_LN:
            g = tl.load(ln_w_ptr + k, mask=k_ok, other=0.0).to(tl.float32)
            beta = tl.load(ln_b_ptr + k, mask=k_ok, other=0.0).to(tl.float32)
            x = (x - mean) * rstd * g + beta
        return tl.where(m, x, 0.0)

    @triton.jit
    def _linear(  # type: ignore[no-untyped-def]
        base_ptr,  # [B, K] input (any float dtype)
        part_ptr,  # [NUM_PARTS, B, K] fp32 partial sums added to the input
        bias_in_ptr,  # [K] bias added to the input (the partials' layer's bias)
        xout_ptr,  # [B, K] fp32: the assembled input, stored by the first program (WRITE_X)
        ln_w_ptr,
        ln_b_ptr,
        w_ptr,  # [N, K] weight, row-major
        b_ptr,  # [N] bias
        out_ptr,  # [SPLIT_K, B, N] fp32 partials, or [B, N] in out's dtype when SPLIT_K == 1
        B,
        N,
        K,
        k_per_split,
        eps,
        NUM_PARTS: tl.constexpr,
        HAS_BIAS_IN: tl.constexpr,
        WRITE_X: tl.constexpr,
        HAS_LN: tl.constexpr,
        HAS_BIAS: tl.constexpr,
        GELU: tl.constexpr,
        SPLIT_K: tl.constexpr,
        BLOCK_B: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        ONE_TILE: tl.constexpr,  # HAS_LN and K <= BLOCK_K
        PDL: tl.constexpr,
    ):
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        pid_b = tl.program_id(2)
        rows = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)[:, None]  # [R, 1]
        row_ok = rows < B
        cols = tl.arange(0, BLOCK_K)[None, :]  # [1, C]
        n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [N_blk]
        n_ok = n < N
        k_lo = pid_k * k_per_split
        k_hi = k_lo + k_per_split
        # The first weight tile (with the planned tiles: all of this program's weights) does not depend on the
        # kernel before: with programmatic dependent launch it streams in while that kernel finishes.
        k_first = k_lo + cols
        k_first_ok = (k_first < K) & (k_first < k_hi)
        w_first = tl.load(w_ptr + n[:, None] * K + k_first, mask=n_ok[:, None] & k_first_ok, other=0.0)
        if PDL:
            gdc_launch_dependents()  # the next kernel may start prefetching its own weights
            gdc_wait()  # everything written before this kernel is visible from here on
        mean = tl.zeros([BLOCK_B, 1], dtype=tl.float32)
        rstd = tl.zeros([BLOCK_B, 1], dtype=tl.float32)
        if ONE_TILE:  # LayerNorm over rows that fit one tile: one read of the stream for statistics and product
            m = row_ok & k_first_ok
            x = _load_stream(base_ptr, part_ptr, bias_in_ptr, rows, k_first, m, B, K, NUM_PARTS, HAS_BIAS_IN)
            if WRITE_X:  # noqa: SIM102 - Triton keeps compile-time and run-time branches apart
                if pid_n == 0:
                    tl.store(xout_ptr + rows * K + k_first, x, mask=m)
            mean = tl.sum(x, axis=1)[:, None] / K
            centred = tl.where(m, x - mean, 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1)[:, None] / K + eps)
            g = tl.load(ln_w_ptr + k_first, mask=k_first_ok, other=0.0).to(tl.float32)
            beta = tl.load(ln_b_ptr + k_first, mask=k_first_ok, other=0.0).to(tl.float32)
            x = tl.where(m, centred * rstd * g + beta, 0.0).to(w_ptr.dtype.element_ty)
        elif HAS_LN:  # row statistics over the whole input in a loop (SPLIT_K is 1 with LN)
            acc1 = tl.zeros([BLOCK_B, BLOCK_K], dtype=tl.float32)
            acc2 = tl.zeros([BLOCK_B, BLOCK_K], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                k = k0 + cols
                m = row_ok & (k < K)
                x = _load_stream(base_ptr, part_ptr, bias_in_ptr, rows, k, m, B, K, NUM_PARTS, HAS_BIAS_IN)
                if WRITE_X:  # noqa: SIM102 - Triton keeps compile-time and run-time branches apart
                    if pid_n == 0:
                        tl.store(xout_ptr + rows * K + k, x, mask=m)
                acc1 += x
                acc2 += x * x
            mean = tl.sum(acc1, axis=1)[:, None] / K
            rstd = 1.0 / tl.sqrt(tl.maximum(tl.sum(acc2, axis=1)[:, None] / K - mean * mean, 0.0) + eps)
        if not ONE_TILE:
            x = _input_tile(
                base_ptr, part_ptr, bias_in_ptr, ln_w_ptr, ln_b_ptr, rows, row_ok, k_first, k_first_ok, mean, rstd,
                B, K, NUM_PARTS, HAS_BIAS_IN, HAS_LN,
            ).to(w_ptr.dtype.element_ty)  # fmt: skip
        if BLOCK_B == 1:
            acc = w_first.to(tl.float32) * x.to(tl.float32)  # [N_blk, C], reduced over C at the end
        else:
            acc_d = tl.dot(x, tl.trans(w_first), tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32))
        for k0 in range(k_lo + BLOCK_K, k_hi, BLOCK_K):  # the rest of K when it is longer than one tile
            k = k0 + cols
            k_ok = (k < K) & (k < k_hi)
            x = _input_tile(
                base_ptr, part_ptr, bias_in_ptr, ln_w_ptr, ln_b_ptr, rows, row_ok, k, k_ok, mean, rstd,
                B, K, NUM_PARTS, HAS_BIAS_IN, HAS_LN,
            ).to(w_ptr.dtype.element_ty)  # fmt: skip
            w = tl.load(w_ptr + n[:, None] * K + k, mask=n_ok[:, None] & k_ok, other=0.0)  # [N_blk, C]
            if BLOCK_B == 1:
                acc += w.to(tl.float32) * x.to(tl.float32)
            else:
                acc_d = tl.dot(x, tl.trans(w), acc_d)
        if BLOCK_B == 1:  # noqa: SIM108 - a compile-time branch: only one of acc / acc_d exists
            y = tl.sum(acc, axis=1)[None, :]  # [1, N_blk]
        else:
            y = acc_d
        out_mask = row_ok & n_ok[None, :]
        if SPLIT_K > 1:  # partial sums: the consumer adds them (and the bias) in a fixed order
            tl.store(out_ptr + (pid_k * B + rows) * N + n[None, :], y, mask=out_mask)
        else:
            if HAS_BIAS:
                y += tl.load(b_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            if GELU:
                y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
            tl.store(out_ptr + rows * N + n[None, :], y.to(out_ptr.dtype.element_ty), mask=out_mask)

    @triton.jit
    def _paged_attention(  # type: ignore[no-untyped-def]
        qkv_ptr,  # [B, 3 * H * DH]: the new token's q, k, v
        k_cache_ptr,  # this layer's keys [num_blocks * BS, H, DH]
        v_cache_ptr,
        tables_ptr,  # Long[B, W] block tables
        pos_ptr,  # Long[B]: position of the new token
        out_ptr,  # [B, H * DH]
        W,
        scale,
        H: tl.constexpr,
        DH: tl.constexpr,
        BS: tl.constexpr,
        BLOCK_T: tl.constexpr,
        PDL: tl.constexpr,
    ):
        b = tl.program_id(0)
        h = tl.program_id(1)
        D: tl.constexpr = H * DH
        d = tl.arange(0, DH)
        # The cached history (positions < pos, written by earlier steps) and the block table are inputs of the
        # step, not of the kernel before: the first tile is read before waiting for that kernel.
        pos = tl.load(pos_ptr + b)
        t = tl.arange(0, BLOCK_T)
        ok = t < pos
        blk = tl.load(tables_ptr + b * W + t // BS, mask=ok, other=0)
        offs = (blk * BS + t % BS)[:, None] * D + h * DH + d[None, :]
        k_hist = tl.load(k_cache_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
        v_hist = tl.load(v_cache_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
        if PDL:
            gdc_launch_dependents()
            gdc_wait()
        row = qkv_ptr + b * 3 * D + h * DH
        q = tl.load(row + d).to(tl.float32)
        k_new = tl.load(row + D + d).to(k_cache_ptr.dtype.element_ty)
        v_new = tl.load(row + 2 * D + d).to(v_cache_ptr.dtype.element_ty)
        slot = tl.load(tables_ptr + b * W + pos // BS) * BS + pos % BS
        tl.store(k_cache_ptr + slot * D + h * DH + d, k_new)
        tl.store(v_cache_ptr + slot * D + h * DH + d, v_new)
        # online softmax over the new token (always visible), the first tile, then any further tiles
        m_self = tl.sum(q * k_new.to(tl.float32), axis=0) * scale
        s = tl.where(ok, tl.sum(k_hist * q[None, :], axis=1) * scale, float("-inf"))
        m_i = tl.maximum(m_self, tl.max(s, axis=0))
        p_self = tl.exp(m_self - m_i)
        p = tl.exp(s - m_i)
        l_i = p_self + tl.sum(p, axis=0)
        acc = p_self * v_new.to(tl.float32) + tl.sum(p[:, None] * v_hist, axis=0)
        for t0 in range(BLOCK_T, pos, BLOCK_T):  # names of its own: Triton types loop-carried values strictly
            tt = t0 + tl.arange(0, BLOCK_T)
            tt_ok = tt < pos
            tt_blk = tl.load(tables_ptr + b * W + tt // BS, mask=tt_ok, other=0)
            tt_offs = (tt_blk * BS + tt % BS)[:, None] * D + h * DH + d[None, :]
            k = tl.load(k_cache_ptr + tt_offs, mask=tt_ok[:, None], other=0.0).to(tl.float32)
            st = tl.where(tt_ok, tl.sum(k * q[None, :], axis=1) * scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(st, axis=0))
            alpha = tl.exp(m_i - m_new)
            pt = tl.exp(st - m_new)
            v = tl.load(v_cache_ptr + tt_offs, mask=tt_ok[:, None], other=0.0).to(tl.float32)
            l_i = l_i * alpha + tl.sum(pt, axis=0)
            acc = acc * alpha + tl.sum(pt[:, None] * v, axis=0)
            m_i = m_new
        tl.store(out_ptr + b * D + h * DH + d, (acc / l_i).to(out_ptr.dtype.element_ty))

    @triton.jit
    def _embed(  # type: ignore[no-untyped-def]
        codes_ptr, pos_ptr, code_emb_ptr, pos_emb_ptr, extra_ptr, out_ptr, D,
        BLOCK_D: tl.constexpr, HAS_EXTRA: tl.constexpr,
    ):  # fmt: skip
        b = tl.program_id(0)
        d = tl.arange(0, BLOCK_D)
        ok = d < D
        c = tl.load(codes_ptr + b)
        p = tl.load(pos_ptr + b)
        x = tl.load(code_emb_ptr + c * D + d, mask=ok, other=0.0).to(tl.float32)
        x += tl.load(pos_emb_ptr + p * D + d, mask=ok, other=0.0).to(tl.float32)
        if HAS_EXTRA:  # the phoneme-pointer embedding of the row's fed token
            x += tl.load(extra_ptr + b * D + d, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + b * D + d, x, mask=ok)


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch: a CUDA device of compute capability 9.0 or newer and a Triton that emits
    grid dependency control and launches with the attribute."""
    if not (HAVE_GDC and device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9):
        return False
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:  # pragma: no cover - a Triton without the NVIDIA backend
        return False
    return "launch_pdl" in getattr(CUDAOptions, "__dataclass_fields__", {})


@dataclass(frozen=True)
class LinearPlan:
    """Launch shape of one `_linear`: programs over N (and K splits, and row tiles)."""

    block_b: int
    block_n: int
    block_k: int
    split_k: int
    k_per_split: int
    num_warps: int


def plan_linear(batch: int, n: int, k: int, sms: int, allow_split: bool, whole_rows: bool = False) -> LinearPlan:
    """Launch shape of one `_linear`. Batch 1: each program takes `block_n` weight rows and, where the layer has
    no LayerNorm prologue (which needs whole rows), a slice of K — split until a program's slice fits one tile
    and there are about two programs per SM. Batches 2-16: tensor-core tiles of 16 rows, K in a loop."""
    block_b = 1 if batch == 1 else 16
    block_n, block_k, warps = GEMV_TILE if batch == 1 else DOT_TILE
    programs = math.ceil(n / block_n)
    split = 1
    if allow_split:
        if batch == 1:  # a slice fits one tile
            split = 1 << max(0, math.ceil(k / block_k) - 1).bit_length()
        while programs * split * 2 <= 2 * sms and k // (split * 2) >= 128:
            split *= 2
    k_per_split = math.ceil(k / split)
    if batch == 1 and whole_rows and k <= MAX_ROW_TILE:  # LayerNorm prologue: the whole row in one tile
        block_k = 1 << (k - 1).bit_length()
        warps = max(warps, min(8, block_n * block_k // 1024))
    elif batch == 1:  # one tile per program when it fits: all its weights requested at once
        block_k = min(block_k, 1 << (k_per_split - 1).bit_length())
    k_per_split = math.ceil(k_per_split / block_k) * block_k
    split = math.ceil(k / k_per_split)
    return LinearPlan(block_b, block_n, block_k, split, k_per_split, warps)


def _launch_linear(
    x: Tensor,
    weight: Tensor,
    out: Tensor,
    plan: LinearPlan,
    pdl: bool,
    *,
    parts: Tensor | None = None,
    bias_in: Tensor | None = None,
    x_out: Tensor | None = None,
    ln: tuple[Tensor, Tensor, float] | None = None,
    bias: Tensor | None = None,
    gelu: bool = False,
) -> None:
    b, k = x.shape
    n = weight.shape[0]
    ln_w, ln_b, eps = ln if ln is not None else (weight, weight, 0.0)
    grid = (math.ceil(n / plan.block_n), plan.split_k, math.ceil(b / plan.block_b))
    _linear[grid](
        x,
        parts if parts is not None else x,
        bias_in if bias_in is not None else weight,
        x_out if x_out is not None else x,
        ln_w,
        ln_b,
        weight,
        bias if bias is not None else weight,
        out,
        b,
        n,
        k,
        plan.k_per_split,
        eps,
        NUM_PARTS=0 if parts is None else parts.shape[0],
        HAS_BIAS_IN=bias_in is not None,
        WRITE_X=x_out is not None,
        HAS_LN=ln is not None,
        HAS_BIAS=bias is not None,
        GELU=gelu,
        SPLIT_K=plan.split_k,
        BLOCK_B=plan.block_b,
        BLOCK_N=plan.block_n,
        BLOCK_K=plan.block_k,
        ONE_TILE=ln is not None and k <= plan.block_k,
        PDL=pdl,
        num_warps=plan.num_warps,
        **({"launch_pdl": True} if pdl else {}),
    )


class FusedDecode:
    """The decode forward of an ARDecoder over a PagedKVCache in 5 launches per layer (+ embedding and head).

    Same contract as `ARDecoder.forward_paged` for one new token per row: codes Long[B, 1] (the last tokens),
    positions Long[B, 1], block tables Long[B, W] → logits [B, out_vocab] in the model's dtype. Holds no state
    between calls, so a CUDA graph captures one call per bucket (workspaces come from the graph's pool)."""

    max_batch = MAX_FUSED_BATCH

    def __init__(self, model: ARDecoder, cache: PagedKVCache, pdl: bool | None = None) -> None:
        """`pdl`: launch with programmatic dependent launch (each kernel requests its weights while the one
        before finishes); default: where supported (Hopper or newer, a Triton with grid dependency control)."""
        if not HAVE_TRITON:
            raise ModelError("the fused AR decode kernels need triton (pip install triton), which is not installed")
        if model.config.head_dim & (model.config.head_dim - 1):
            raise ModelError(f"the fused decode attention needs a power-of-two head size, not {model.config.head_dim}")
        self.model = model
        self.cache = cache
        self.blocks = [b for b in model.blocks if isinstance(b, Block)]
        device = cache.k.device
        self.sms = (
            torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else DEFAULT_SMS
        )
        supported = pdl_supported(device)
        if pdl and not supported:
            raise ModelError("programmatic dependent launch needs a Hopper (sm_90) or newer GPU and Triton >= 3.4")
        self.pdl = supported if pdl is None else pdl

    @torch.no_grad()
    def __call__(self, codes: Tensor, positions: Tensor, tables: Tensor, extra: Tensor | None = None) -> Tensor:
        """`extra` [B, D]: added to the fed tokens' embeddings (a phoneme-pointer model's pointer embeddings)."""
        model, cfg = self.model, self.model.config
        batch, dim = codes.shape[0], cfg.dim
        if batch > MAX_FUSED_BATCH:
            raise ModelError(f"the fused decode step takes at most {MAX_FUSED_BATCH} rows, not {batch}")
        dev = codes.device
        pos = positions.reshape(batch)
        ff = cfg.ff_mult * dim
        qkv_plan = plan_linear(batch, 3 * dim, dim, self.sms, allow_split=False, whole_rows=True)
        proj_plan = plan_linear(batch, dim, dim, self.sms, allow_split=True)
        up_plan = plan_linear(batch, ff, dim, self.sms, allow_split=False, whole_rows=True)
        down_plan = plan_linear(batch, dim, ff, self.sms, allow_split=True)
        head_plan = plan_linear(batch, cfg.out_vocab, dim, self.sms, allow_split=False, whole_rows=True)
        wdt = model.head.weight.dtype
        stream = [torch.empty(batch, dim, device=dev, dtype=torch.float32) for _ in range(2)]  # ping-pong
        qkv = torch.empty(batch, 3 * dim, device=dev, dtype=wdt)
        attn = torch.empty(batch, dim, device=dev, dtype=wdt)
        hidden = torch.empty(batch, ff, device=dev, dtype=wdt)
        proj_parts = torch.empty(proj_plan.split_k, batch, dim, device=dev, dtype=torch.float32)
        down_parts = torch.empty(down_plan.split_k, batch, dim, device=dev, dtype=torch.float32)
        _embed[(batch,)](
            codes.reshape(batch), pos, model.codes.weight, model.pos.weight,
            extra.reshape(batch, dim) if extra is not None else stream[1], stream[1], dim,
            BLOCK_D=triton.next_power_of_2(dim), HAS_EXTRA=extra is not None,
        )  # fmt: skip
        prev_bias: Tensor | None = None  # the bias of the partials being folded in (None before the first layer)
        width = tables.shape[1]
        # cached positions per attention tile: the whole context of short buckets in one or two dependent loads
        block_t = max(16, min(128, triton.next_power_of_2(width * self.cache.block_size)))
        scale = 1.0 / math.sqrt(cfg.head_dim)
        for layer, block in enumerate(self.blocks):
            x_in, x_mid = stream[1], stream[0]  # x_in: the stream after the previous layer (still missing ΣP2)
            _launch_linear(
                x_in, block.qkv.weight, qkv, qkv_plan, self.pdl,
                parts=down_parts if prev_bias is not None else None, bias_in=prev_bias, x_out=x_mid,
                ln=(block.norm1.weight, block.norm1.bias, block.norm1.eps), bias=block.qkv.bias,
            )  # fmt: skip
            _paged_attention[(batch, cfg.heads)](
                qkv, self.cache.k[layer], self.cache.v[layer], tables, pos, attn, width, scale,
                H=cfg.heads, DH=cfg.head_dim, BS=self.cache.block_size, BLOCK_T=block_t, PDL=self.pdl,
                num_warps=4 if block_t <= 64 else 8, **({"launch_pdl": True} if self.pdl else {}),
            )  # fmt: skip
            _launch_linear(attn, block.proj.weight, proj_parts, proj_plan, self.pdl)
            up, down = block.ff[0], block.ff[2]
            assert isinstance(up, torch.nn.Linear) and isinstance(down, torch.nn.Linear)
            _launch_linear(
                x_mid, up.weight, hidden, up_plan, self.pdl,
                parts=proj_parts, bias_in=block.proj.bias, x_out=stream[1],
                ln=(block.norm2.weight, block.norm2.bias, block.norm2.eps), bias=up.bias, gelu=True,
            )  # fmt: skip
            _launch_linear(hidden, down.weight, down_parts, down_plan, self.pdl)
            prev_bias = down.bias
        logits = torch.empty(batch, cfg.out_vocab, device=dev, dtype=wdt)
        _launch_linear(
            stream[1], model.head.weight, logits, head_plan, self.pdl,
            parts=down_parts if prev_bias is not None else None, bias_in=prev_bias,
            ln=(model.norm.weight, model.norm.bias, model.norm.eps),
        )  # fmt: skip
        return logits
