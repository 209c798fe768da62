"""Eager bf16 CPU engines run their linears on weights reordered once for oneDNN (`prepack_linears`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rtvox.engines import build_engine, eager
from rtvox.engines.eager import PackedLinear, can_pack_bf16_linears, prepack_linears
from rtvox.engines.modules import Fp32Island, cast_module
from rtvox.engines.quality import random_inputs
from rtvox.models.bundle import ModelBundle

from .conftest import CPU

needs_packing = pytest.mark.skipif(
    not can_pack_bf16_linears(), reason="this torch build or CPU has no oneDNN packed bf16 linear (AVX-512 BW/VL/DQ)"
)


def test_where_packing_is_refused_bf16_engines_keep_plain_linears_and_run(
    bundle: ModelBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU without AVX-512 has the op but refuses to reorder bf16 weights: nothing is packed, nothing raises."""
    monkeypatch.setattr(eager, "can_pack_bf16_linears", lambda: False)
    net = nn.Sequential(nn.Linear(8, 8).to(torch.bfloat16))
    assert prepack_linears(net) == 0 and type(net[0]) is nn.Linear
    cfg = bundle.config.acoustic
    inputs = random_inputs([9], cfg.cond_dim, cfg.vocab_size, [70], seed=3)
    hidden, durations = build_engine("eager", "acoustic_encode", bundle.acoustic.encode, CPU, torch.float32)(
        *inputs.tensors(CPU)
    )
    engine = build_engine("eager", "acoustic_decode", bundle.acoustic.decode, CPU, torch.bfloat16)
    assert "packed_linears" not in engine.info  # type: ignore[attr-defined]
    mel = engine(hidden, durations)[0]
    assert mel.dtype == torch.float32 and torch.isfinite(mel).all()


@needs_packing
@pytest.mark.parametrize("shape", [(1, 1, 64), (1, 37, 64), (3, 500, 64), (20, 64)])
def test_packed_linear_equals_the_plain_one_for_any_row_count(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(64, 96).to(torch.bfloat16).eval()
    packed = PackedLinear(linear)
    x = torch.randn(shape).to(torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(packed(x), linear(x))
    assert [p.data_ptr() for p in packed.parameters()] == [p.data_ptr() for p in linear.parameters()]


@needs_packing
def test_prepack_swaps_bf16_linears_and_leaves_fp32_islands() -> None:
    from rtvox.models.vocos import Vocos, VocosConfig

    torch.manual_seed(0)
    vocos = Vocos(VocosConfig.preset("tiny")).eval()
    net = cast_module(vocos, CPU, torch.bfloat16)
    bf16_linears = sum(type(m) is nn.Linear and m.weight.dtype == torch.bfloat16 for m in net.modules())
    assert prepack_linears(net) == bf16_linears > 0
    assert isinstance(net.blocks[0].pw1, PackedLinear)
    assert isinstance(net.head, Fp32Island)
    assert not any(isinstance(m, PackedLinear) for m in net.head.modules())
    assert prepack_linears(cast_module(vocos, CPU, torch.float32)) == 0  # fp32 linears stay plain


@needs_packing
def test_eager_bf16_engines_pack_and_match_unpacked(bundle: ModelBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = bundle.config.acoustic
    inputs = random_inputs([9, 30], cfg.cond_dim, cfg.vocab_size, [70, 150], seed=3)
    hidden, durations = build_engine("eager", "acoustic_encode", bundle.acoustic.encode, CPU, torch.float32)(
        *inputs.tensors(CPU)
    )
    packed = build_engine("eager", "acoustic_decode", bundle.acoustic.decode, CPU, torch.bfloat16)
    assert int(packed.info["packed_linears"]) > 0  # type: ignore[attr-defined]
    monkeypatch.setattr("rtvox.engines.eager.prepack_linears", lambda net: 0)
    plain = build_engine("eager", "acoustic_decode", bundle.acoustic.decode, CPU, torch.bfloat16)
    assert "packed_linears" not in plain.info  # type: ignore[attr-defined]
    assert torch.equal(packed(hidden, durations)[0], plain(hidden, durations)[0])
    # The bundle's own model keeps plain linears: the engine packs its copy.
    assert not any(isinstance(m, PackedLinear) for m in bundle.acoustic.modules())
