"""The attention layers: the opaque SDPA op that compiled GPU programs use agrees with plain masked attention."""

from __future__ import annotations

import pytest
import torch

from rtvox.models.layers import SelfAttention, masked_attention


def _qkv_mask(lengths: list[int], n: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(len(lengths), 2, n, 16, generator=g) for _ in range(3))
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    return q, k, v, mask


@pytest.mark.parametrize(("lengths", "n"), [([7, 3], 7), ([40, 1, 25], 40)])
def test_masked_sdpa_op_matches_masked_attention(lengths: list[int], n: int) -> None:
    q, k, v, mask = _qkv_mask(lengths, n, seed=n)
    got = torch.ops.rtvox.masked_sdpa(q, k, v, mask)
    assert got.is_contiguous()
    torch.testing.assert_close(got, masked_attention(q, k, v, mask), rtol=1e-5, atol=1e-5)


def test_masked_sdpa_op_compiles_with_dynamic_shapes() -> None:
    # the op's fake (shape) function is what torch.compile traces; two lengths through one dynamic compile
    fn = torch.compile(lambda q, k, v, m: torch.ops.rtvox.masked_sdpa(q, k, v, m) + 1.0, fullgraph=True, dynamic=True)
    for lengths, n in (([5, 2], 5), ([9, 9, 4], 9)):
        q, k, v, mask = _qkv_mask(lengths, n, seed=1)
        torch.testing.assert_close(fn(q, k, v, mask), masked_attention(q, k, v, mask) + 1.0, rtol=1e-5, atol=1e-5)


def test_self_attention_ignores_padding() -> None:
    torch.manual_seed(0)
    layer = SelfAttention(32, 2).eval()
    x = torch.randn(1, 6, 32)
    mask = torch.tensor([[True] * 4 + [False] * 2])
    with torch.inference_mode():
        full = layer(x, mask)[:, :4]
        noisy = x.clone()
        noisy[:, 4:] = 100.0  # what padded positions hold must not reach real ones
        torch.testing.assert_close(layer(noisy, mask)[:, :4], full)
