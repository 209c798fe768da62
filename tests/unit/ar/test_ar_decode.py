"""The autoregressive family's decode path: paged-cache parity with the full forward, continuous batching,
token-count duration control, the block allocator and seeded on-device sampling."""

from __future__ import annotations

import copy
import math
import subprocess
import sys

import pytest
import torch

from rtvox.models.ar import ARConfig, ARDecoder, PagedKVCache
from rtvox.models.sampling import SamplingParams, filter_logits, sample, uniform_noise
from rtvox.runtime.ar import ARDecodeEngine, ARRequest

GREEDY = SamplingParams(temperature=0.0, repetition_penalty=1.0)


@pytest.fixture(scope="module")
def model() -> ARDecoder:
    torch.manual_seed(0)
    return ARDecoder(ARConfig.preset("tiny")).eval()


def _request(i: int, n: int, config: ARConfig, **kw: object) -> ARRequest:
    g = torch.Generator().manual_seed(100 + i)
    phonemes = torch.randint(1, config.text_vocab, (n,), generator=g).tolist()
    cond = torch.randn(config.cond_dim, generator=g).tolist()
    return ARRequest(f"r{i}", phonemes, cond, **kw)  # type: ignore[arg-type]


def _greedy_reference(model: ARDecoder, request: ARRequest, steps: int) -> list[int]:
    """Greedy decoding by re-running the full causal forward every step (no cache); a phoneme-pointer model's
    forward derives every fed token's pointer from the tokens themselves."""
    c = model.config
    cond = torch.tensor([list(request.cond)])
    count = torch.tensor([request.token_count or 0])
    phonemes = torch.tensor([list(request.phonemes)])
    codes: list[int] = []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(
                cond, count, phonemes, torch.tensor([codes], dtype=torch.long), torch.tensor([len(phonemes[0])])
            )
            step_logits = logits[0, -1].clone()
            step_logits[c.bos] = float("-inf")
            if request.token_count is not None and len(codes) < request.token_count:
                step_logits[c.eos] = float("-inf")
            # a phoneme-pointer model ends only once the pointer (the advances' running sum) reaches the last phoneme
            if c.advances and sum(t % c.advances for t in codes) < len(request.phonemes) - 1:
                step_logits[c.eos] = float("-inf")
            token = int(step_logits.argmax())
            if token == c.eos:
                break
            codes.append(token)
    return codes


def test_paged_forward_matches_the_full_forward_with_padding(model: ARDecoder) -> None:
    c = model.config
    torch.manual_seed(1)
    phonemes = torch.randint(1, c.text_vocab, (2, 7))
    ph_len = torch.tensor([7, 4])
    phonemes[1, 4:] = 0
    cond, count = torch.randn(2, c.cond_dim), torch.tensor([12, 0])
    codes = torch.randint(0, c.n_codes, (2, 9))
    cache = PagedKVCache(c, num_blocks=12, block_size=4, device=torch.device("cpu"), dtype=torch.float32)
    with torch.no_grad():
        full = model(cond, count, phonemes, codes, ph_len)
        for b in range(2):
            n = int(ph_len[b])
            table = torch.tensor([[5 * b + i for i in (4, 0, 2, 1, 3)]])  # blocks out of order on purpose
            x = model.prompt_embeddings(cond[b : b + 1], count[b : b + 1], phonemes[b : b + 1, :n])
            logits = model.forward_paged(x, torch.arange(x.shape[1])[None], cache, table)
            torch.testing.assert_close(logits[0], full[b, 0], atol=1e-5, rtol=1e-5)
            for t in range(codes.shape[1]):
                position = torch.tensor([[x.shape[1] + t]])
                logits = model.forward_paged(model.code_embeddings(codes[b : b + 1, t : t + 1]), position, cache, table)
                torch.testing.assert_close(logits[0], full[b, t + 1], atol=1e-5, rtol=1e-5)


def test_batched_prefill_of_unequal_prompts_equals_one_at_a_time(model: ARDecoder) -> None:
    c = model.config
    torch.manual_seed(2)
    lengths = [9, 4, 6]
    prompts = [
        model.prompt_embeddings(torch.randn(1, c.cond_dim), torch.tensor([n]), torch.randint(1, c.text_vocab, (1, n)))[
            0
        ]
        for n in lengths
    ]
    tables = torch.tensor([[0, 1, 2], [3, 4, 4], [5, 6, 6]])  # short rows padded with a block of their own
    kw = dict(num_blocks=8, block_size=4, device=torch.device("cpu"), dtype=torch.float32)
    one, batched = PagedKVCache(c, **kw), PagedKVCache(c, **kw)  # type: ignore[arg-type]
    with torch.no_grad():
        alone = [
            model.forward_paged(p[None], torch.arange(len(p))[None], one, tables[i : i + 1])[0]
            for i, p in enumerate(prompts)
        ]
        x = torch.nn.utils.rnn.pad_sequence(prompts, batch_first=True)
        positions = torch.arange(x.shape[1])[None].expand(3, -1)
        together = model.forward_paged(x, positions, batched, tables, torch.tensor([len(p) for p in prompts]))
    torch.testing.assert_close(together, torch.stack(alone), atol=1e-5, rtol=1e-5)
    # every real key landed where the one-at-a-time prefill put it; the padding only touched the scratch block
    torch.testing.assert_close(batched.k[:, :7], one.k[:, :7], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched.v[:, :7], one.v[:, :7], atol=1e-5, rtol=1e-5)
    assert batched.k[:, 7].abs().sum() > 0 and one.k[:, 7].abs().sum() == 0


def test_engine_greedy_equals_recompute_and_requests_join_and_leave(model: ARDecoder) -> None:
    c = model.config
    requests = [
        _request(0, 5, c, token_count=20, sampling=GREEDY),
        _request(1, 9, c, token_count=7, sampling=GREEDY),
        _request(2, 3, c, max_new_tokens=15, sampling=GREEDY),  # free length: this tiny model says eos at once
        _request(3, 6, c, token_count=9, sampling=GREEDY),
    ]
    engine = ARDecodeEngine(model, num_blocks=32, block_size=4, max_batch=8)
    engine.add(requests[0])
    out: dict[str, list[int]] = {r.request_id: [] for r in requests}
    batch_sizes = []
    for step in range(200):
        if step == 3:
            engine.add(requests[1])  # joins a running batch
        if step == 5:
            engine.add(requests[2])
            engine.add(requests[3])
        if engine.idle():
            break
        batch_sizes.append(len(engine.scheduler.running))
        for event in engine.step():
            if event.token is not None:
                out[event.request_id].append(event.token)
    assert engine.idle() and len(engine.scheduler.allocator.free) == 32  # every block came back
    assert max(batch_sizes) == 3  # r0, r1 and r3 decoded together
    for r in requests:
        steps = r.token_count + 1 if r.token_count is not None else r.max_new_tokens
        assert out[r.request_id] == _greedy_reference(model, r, steps)[: len(out[r.request_id])]
    assert len(out["r0"]) == 20 and len(out["r1"]) == 7 and len(out["r3"]) == 9  # token-count control is exact
    assert out["r2"] == []  # free mode stops at eos


def test_sampled_tokens_do_not_depend_on_the_batch(model: ARDecoder) -> None:
    c = model.config
    params = SamplingParams(temperature=1.0, top_k=10, top_p=0.95, repetition_penalty=1.2, seed=7)
    alone = ARDecodeEngine(model, num_blocks=32, block_size=4).generate(
        [_request(0, 6, c, token_count=12, sampling=params)]
    )
    others = [_request(i, 4 + i, c, token_count=5 + i, sampling=SamplingParams(seed=i)) for i in (1, 2, 3)]
    together = ARDecodeEngine(model, num_blocks=32, block_size=4).generate(
        [*others[:1], _request(0, 6, c, token_count=12, sampling=params), *others[1:]]
    )
    assert alone["r0"] == together["r0"] and len(alone["r0"]) == 12
    reseeded = ARDecodeEngine(model, num_blocks=32, block_size=4).generate(
        [_request(0, 6, c, token_count=12, sampling=SamplingParams(temperature=1.0, top_k=10, seed=8))]
    )
    assert reseeded["r0"] != alone["r0"]


def test_admission_waits_for_free_blocks_and_rejects_what_can_never_fit(model: ARDecoder) -> None:
    c = model.config
    engine = ARDecodeEngine(model, num_blocks=6, block_size=4, max_batch=8)
    # each needs ceil((3 + 5 + 1 + 10) / 4) = 5 blocks: the second waits until the first finishes
    results = engine.generate([_request(i, 5, c, token_count=10, sampling=GREEDY) for i in range(2)])
    assert [len(v) for v in results.values()] == [10, 10]
    with pytest.raises(ValueError, match="cache blocks"):
        engine.add(_request(9, 5, c, token_count=60))
    with pytest.raises(ValueError, match="cond has"):
        engine.add(ARRequest("bad", [1, 2], [0.0] * 3))


def test_sampling_filters_and_noise() -> None:
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])
    kept = filter_logits(logits, torch.tensor([2]), torch.tensor([1.0]))
    assert torch.isfinite(kept).tolist() == [[True, True, False, False, False]]
    kept = filter_logits(logits, torch.tensor([0]), torch.tensor([0.5]))
    assert torch.isfinite(kept).sum() == 1  # the top token already holds > 50 %
    u = uniform_noise(torch.tensor([1, 1, 2]), torch.tensor([0, 1, 0]), 4096)
    assert float(u.min()) > 0 and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.02
    assert not torch.equal(u[0], u[1]) and not torch.equal(u[0], u[2])
    # temperature-1 draws follow the softmax
    n = 20000
    rows = logits[:, :4].repeat(n, 1)
    ones, zeros = torch.ones(n), torch.zeros(n, dtype=torch.long)
    drawn = sample(rows, torch.zeros(n, 4, dtype=torch.bool), ones, zeros, ones, ones, torch.arange(n), zeros)
    freq = torch.bincount(drawn, minlength=4).float() / n
    torch.testing.assert_close(freq, rows[0].softmax(-1), atol=0.015, rtol=0)
    # the repetition penalty lowers a token already produced
    seen = torch.tensor([[True, False, False, False]])
    greedy = sample(
        logits[:, :4],
        seen,
        torch.zeros(1),
        torch.zeros(1, dtype=torch.long),
        torch.ones(1),
        torch.tensor([10.0]),
        torch.zeros(1, dtype=torch.long),
        torch.zeros(1, dtype=torch.long),
    )
    assert greedy.tolist() == [1]


def test_sampling_params_validate() -> None:
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)


def test_static_padded_decode_step_matches_the_dynamic_one(model: ARDecoder) -> None:
    c = model.config
    requests = [_request(i, 3 + 2 * i, c, token_count=6 + 3 * i, sampling=GREEDY) for i in range(3)]
    dynamic = ARDecodeEngine(model, num_blocks=40, block_size=4).generate(requests)
    static_engine = ARDecodeEngine(model, num_blocks=40, block_size=4, static=True)
    static = static_engine.generate(requests)
    assert static == dynamic
    assert static_engine.cache.num_blocks == 41  # the scratch block is the pool's last
    assert len(static_engine.scheduler.allocator.free) == 40


def test_cuda_graph_capture_needs_a_cuda_cache(model: ARDecoder) -> None:
    with pytest.raises(ValueError, match="cuda_graph needs the cache on a CUDA device"):
        ARDecodeEngine(model, num_blocks=8, block_size=4, static=True, cuda_graph=True)


def test_a_bfloat16_model_decodes_with_float_conditions(model: ARDecoder) -> None:
    # conditions arrive as float32 lists; a half-precision model must cast them, not fail on the dtype
    half = copy.deepcopy(model).to(torch.bfloat16)
    c = model.config
    out = ARDecodeEngine(half, num_blocks=40, block_size=4, dtype=torch.bfloat16, static=True).generate(
        [_request(0, 4, c, token_count=5, sampling=GREEDY)]
    )
    assert len(out["r0"]) == 5
    assert all(0 <= t < c.n_codes for t in out["r0"])


def test_the_decode_engine_imports_without_the_audio_stack() -> None:
    # the GPU image benchmarks run on lacks soundfile/pyloudnorm: rtvox.runtime must not pull them in eagerly
    code = (
        "import sys; sys.modules['soundfile'] = None; sys.modules['pyloudnorm'] = None\n"
        "import rtvox.runtime.ar\n"
        "assert 'rtvox.runtime.service' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static-buckets"])
def test_pointer_model_decode_feeds_the_pointer_the_training_forward_derives(static: bool) -> None:
    """The runner tracks each sequence's phoneme pointer on the host and feeds it with every token; greedy decode
    through the paged cache must equal the full forward, which computes the same pointers from the tokens; a free
    sequence ends only once the pointer has reached its last phoneme."""
    torch.manual_seed(3)
    model = ARDecoder(ARConfig.preset("tiny", advances=4)).eval()
    for p in model.parameters():  # large enough that the pointer inputs steer the argmax
        torch.nn.init.normal_(p, 0, 0.3)
    c = model.config
    requests = [_request(i, n, c, max_new_tokens=40, sampling=GREEDY) for i, n in enumerate((3, 6, 9))]
    engine = ARDecodeEngine(model, num_blocks=64, block_size=4, max_batch=4, static=static)
    out = engine.generate(requests)
    for r in requests:
        assert out[r.request_id] == _greedy_reference(model, r, 40), r.request_id
        tokens = out[r.request_id]
        if len(tokens) < 40:  # ended by eos: the pointer got to the end first
            assert sum(t % c.advances for t in tokens) >= len(r.phonemes) - 1
    # the pointer inputs matter: the same tokens fed without them give other logits
    x = torch.tensor([[5]])
    with_ptr = model.code_embeddings(x, torch.tensor([[[3, 4, 1]]]))
    assert (with_ptr - model.codes(x)).abs().max() > 0.1
    with pytest.raises(ValueError, match="pointer"):
        model.code_embeddings(x)


@pytest.mark.parametrize("count", [4, 9, 40], ids=["short", "near", "long"])
def test_pointer_model_paces_a_token_count_to_end_on_the_last_phoneme(count: int) -> None:
    """Under a token count, a phoneme-pointer model is paced so every phoneme is reached: a count shorter than the
    model's own pace does not cut the text off, a longer one does not finish early and trail off."""
    torch.manual_seed(5)
    model = ARDecoder(ARConfig.preset("tiny", advances=4)).eval()
    c = model.config
    engine = ARDecodeEngine(model, num_blocks=64, block_size=4, max_batch=4)
    requests = [_request(i, 10, c, token_count=count, sampling=SamplingParams(seed=i)) for i in range(3)]
    for r, tokens in zip(requests, engine.generate(requests).values(), strict=True):
        assert len(tokens) == count
        pointers = torch.tensor([t % c.advances for t in tokens]).cumsum(0).clamp_max(len(r.phonemes) - 1)
        assert int(pointers[-1]) == len(r.phonemes) - 1  # the last phoneme is reached


def test_pointer_pacing_tilts_towards_the_needed_pace_and_masks_advances_too_slow() -> None:
    from rtvox.runtime.ar import NATURAL_TOKENS_PER_PHONEME, PACE_TILT_MAX, ARRunner, PlanItem

    model = ARDecoder(ARConfig.preset("tiny", advances=4)).eval()
    c = model.config
    runner = ARRunner(model, PagedKVCache(c, 4, 4, torch.device("cpu"), torch.float32))
    for rid, pointer in (("slow", 0), ("fast", 0), ("tight", 6), ("free", 0)):
        runner._phonemes[rid], runner._pointer[rid] = tuple(range(1, 11)), pointer  # 10 phonemes
    items = [
        PlanItem("slow", [0], 0, generated=0, token_count=90, budget=90),  # 9 phonemes in 90 tokens: slow down
        PlanItem("fast", [0], 0, generated=0, token_count=6, budget=6),  # 9 in 6: speed up
        PlanItem("tight", [0], 0, generated=9, token_count=10, budget=10),  # 3 phonemes, 1 token: advance 3 now
        PlanItem("free", [0], 0, generated=0, token_count=None, budget=50),
    ]
    logits = torch.zeros(4, c.out_vocab)
    paced = runner._follow_pointer(logits.clone(), items)
    advance = torch.arange(c.n_codes) % c.advances
    slope = {rid: float(paced[row, 1] - paced[row, 0]) for row, rid in enumerate(("slow", "fast", "tight", "free"))}
    assert slope["slow"] == pytest.approx(max(-PACE_TILT_MAX, math.log(9 / 90 * NATURAL_TOKENS_PER_PHONEME)))
    assert slope["fast"] == pytest.approx(min(PACE_TILT_MAX, math.log(9 / 6 * NATURAL_TOKENS_PER_PHONEME)))
    assert (
        torch.isinf(paced[2, : c.n_codes][advance < 3]).all()
        and torch.isfinite(paced[2, : c.n_codes][advance == 3]).all()
    )
    assert torch.equal(paced[3, : c.eos], logits[3, : c.eos])  # free length is not paced ...
    assert torch.isinf(paced[:, c.eos]).all()  # ... and no row may end with phonemes left
    assert torch.equal(paced[:, c.bos], logits[:, c.bos])
