"""Continuous-batching decode for the autoregressive family: a scheduler that owns requests and KV-cache blocks
(ids only, no tensors) and a runner that owns the model, the paged cache and per-request device state (no queues).

Each `ARDecodeEngine.step()`:
  1. the scheduler admits waiting requests while the cache has blocks for their whole budget (prompt + the most
     tokens they may produce) and the batch has room, and plans one decode step for every running request;
  2. the runner prefills the admitted prompts (one forward each), then runs one batched decode forward over
     all running sequences and samples on the device (rtvox.models.sampling);
  3. the scheduler appends the tokens, finishes sequences that emitted eos or reached their token count or
     budget, and frees their blocks; the next step admits whoever waits.
New requests therefore join at step boundaries and finished ones leave at once (continuous batching). Blocks are
reserved for the whole budget at admission, so a running sequence never waits for memory and nothing is preempted.

Duration control: a request with `token_count` gets that many codes exactly — eos is masked before the count and
forced at it — and the count is also in the prompt, so the model plans its pacing (IndexTTS2's scheme).

Phoneme-pointer models (ARConfig.advances > 0): the runner keeps each sequence's pointer on the host (it moves
with every token read back at the step's one sync) and feeds it beside the token; in free mode eos is masked
until the pointer reaches the last phoneme, so a sequence cannot end before it has said everything. With a token
count, the count embedding alone barely moves the model's pace (a request shorter than natural would stop mid-text,
a longer one would trail off in noise), so the runner paces the pointer: each step tilts every token's logit by
λ·advance, λ = log(needed phonemes per token / the corpus's natural rate), held within ±PACE_TILT_MAX, and when
only just enough tokens remain to reach the last phoneme at the fastest advance, slower advances are masked.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rtvox.engines.cudagraph import capture_cuda_graph
from rtvox.models.ar import ARDecoder, PagedKVCache
from rtvox.models.sampling import SamplingParams, sample

# phoneme-pointer pacing under a token count: the training corpus's mean tokens per phoneme (recipes/train/README.md,
# run AR2: 2.17 over the corpus, 2.12 in free-length output) and the largest tilt per phoneme of advance
NATURAL_TOKENS_PER_PHONEME = 2.17
PACE_TILT_MAX = 4.0


@dataclass
class ARRequest:
    """What a caller asks for; plain data."""

    request_id: str
    phonemes: Sequence[int]  # model input ids (skip symbols already removed)
    cond: Sequence[float]  # speaker ⊕ α·emotion, length ARConfig.cond_dim
    token_count: int | None = None  # exact number of codes (duration control); None = free length
    max_new_tokens: int = 500  # free mode's cap
    sampling: SamplingParams = field(default_factory=SamplingParams)

    @property
    def budget(self) -> int:
        """The most codes this request may produce."""
        return self.token_count if self.token_count is not None else self.max_new_tokens

    @property
    def prompt_len(self) -> int:
        """cond + count + phonemes + bos."""
        return 2 + len(self.phonemes) + 1


@dataclass
class SequenceState:
    """The scheduler's record of one admitted request."""

    request: ARRequest
    blocks: list[int]  # cache blocks reserved for the whole budget
    tokens: list[int] = field(default_factory=list)  # codes produced so far (eos not included)
    finished: bool = False


@dataclass
class PlanItem:
    """One sequence in one step: prefill (its prompt) or decode (its last token)."""

    request_id: str
    blocks: list[int]
    position: int  # position of the token fed this step (decode) / prompt length (prefill)
    generated: int  # codes produced before this step
    token_count: int | None
    budget: int


@dataclass
class StepPlan:
    """The scheduler's order to the runner for one step."""

    prefill: list[PlanItem]
    decode: list[PlanItem]


@dataclass
class TokenEvent:
    """A code produced for a request this step (`token` None when the step only finished it)."""

    request_id: str
    token: int | None
    finished: bool


class BlockAllocator:
    """Free list of cache block ids."""

    def __init__(self, num_blocks: int) -> None:
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))

    def take(self, n: int) -> list[int]:
        assert n <= len(self.free), "caller checks capacity first"
        return [self.free.pop() for _ in range(n)]

    def give_back(self, blocks: list[int]) -> None:
        self.free.extend(reversed(blocks))


class ARScheduler:
    """Owns the waiting queue, the running sequences and the block allocator; never touches a tensor."""

    def __init__(self, num_blocks: int, block_size: int, max_batch: int, max_positions: int) -> None:
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_positions = max_positions
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self.waiting: deque[ARRequest] = deque()
        self.running: dict[str, SequenceState] = {}

    def add(self, request: ARRequest) -> None:
        need = self._blocks_needed(request)
        if need > self.num_blocks:
            raise ValueError(
                f"request {request.request_id} needs {need} cache blocks (prompt + {request.budget} codes) but "
                f"the cache holds {self.num_blocks}; shorten the text or the requested duration"
            )
        if request.prompt_len + request.budget > self.max_positions:
            raise ValueError(
                f"request {request.request_id}: prompt + codes exceed the model's {self.max_positions} positions"
            )
        self.waiting.append(request)

    def _blocks_needed(self, request: ARRequest) -> int:
        return math.ceil((request.prompt_len + request.budget) / self.block_size)

    def schedule(self) -> StepPlan:
        prefill: list[PlanItem] = []
        while self.waiting and len(self.running) < self.max_batch:
            request = self.waiting[0]
            need = self._blocks_needed(request)
            if need > len(self.allocator.free):
                break  # first come, first served: later requests do not overtake a big one
            self.waiting.popleft()
            state = SequenceState(request, self.allocator.take(need))
            self.running[request.request_id] = state
            prefill.append(self._item(state, position=request.prompt_len))
        decode = [
            self._item(s, position=s.request.prompt_len + len(s.tokens) - 1)
            for s in self.running.values()
            if s.tokens and not s.finished
        ]
        return StepPlan(prefill, decode)

    @staticmethod
    def _item(state: SequenceState, position: int) -> PlanItem:
        r = state.request
        return PlanItem(r.request_id, state.blocks, position, len(state.tokens), r.token_count, r.budget)

    def update(self, tokens: dict[str, int], eos: int) -> list[TokenEvent]:
        events = []
        for request_id, token in tokens.items():
            state = self.running[request_id]
            if token == eos:
                state.finished = True
                events.append(TokenEvent(request_id, None, True))
            else:
                state.tokens.append(token)
                state.finished = len(state.tokens) >= state.request.budget and state.request.token_count is None
                events.append(TokenEvent(request_id, token, state.finished))
            if state.finished:
                self.allocator.give_back(state.blocks)
                del self.running[request_id]
        return events

    def idle(self) -> bool:
        return not self.waiting and not self.running


BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class StaticDecodeStep:
    """The decode forward at fixed shapes, so it can be captured once per (batch, blocks) bucket (CUDA graphs
    through torch.compile "reduce-overhead"): the batch is padded to the next batch bucket and every block table
    to the next power of two of the batch's longest table (attention cost follows the real context, within 2x);
    padded rows and table entries point at the cache's scratch block (the last one, never handed to a request),
    which padded rows write at position 0 and no real row can see (its keys sit past every real position).

    `cuda_graph` captures each bucket by hand (torch.cuda.CUDAGraph over static input buffers, one shared memory
    pool), around the eager forward or an Inductor-compiled one (`compile_mode` without cudagraphs, e.g.
    "default"): the forward has no host sync and no data-dependent shape, so a replay is the whole step.

    `kernels="triton"` runs buckets of up to 16 rows through `rtvox.engines.ar_fused.FusedDecode` (five fused
    launches per layer, attention reading the cache blocks in place) instead of the model's forward; larger
    buckets keep the forward (cuBLAS GEMMs win there). Not combined with `compile_mode`."""

    def __init__(
        self,
        model: ARDecoder,
        cache: PagedKVCache,
        compile_mode: str | None = None,
        cuda_graph: bool = False,
        kernels: str = "torch",
    ) -> None:
        self.model = model
        self.cache = cache
        if kernels not in ("torch", "triton"):
            raise ValueError(f"kernels must be 'torch' or 'triton', not {kernels!r}")
        if kernels == "triton" and compile_mode is not None:
            raise ValueError("the fused Triton decode kernels are not compiled again: leave compile_mode None")
        self._fused: Any = None
        if kernels == "triton":
            from rtvox.engines.ar_fused import FusedDecode  # triton is imported only when asked for

            self._fused = FusedDecode(model, cache)
        self.scratch = cache.num_blocks - 1
        self.max_blocks = math.ceil(model.config.max_positions / cache.block_size)
        fn = self._forward
        if compile_mode is not None:
            fn = torch.compile(fn, mode=compile_mode, fullgraph=True, dynamic=False)
        self._fn = fn
        if cuda_graph and cache.k.device.type != "cuda":
            raise ValueError("cuda_graph needs the cache on a CUDA device")
        self.cuda_graph = cuda_graph
        self._graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, Tensor, Tensor, Tensor, Tensor, Tensor]] = {}
        self._pool: Any = None  # torch.cuda graph pool handle, shared by every bucket's graph

    def _forward(self, last: Tensor, positions: Tensor, tables: Tensor, pointer: Tensor) -> Tensor:
        ptr = pointer if self.model.config.advances else None
        if self._fused is not None and last.shape[0] <= self._fused.max_batch:
            extra = self.model.pointer_embeddings(ptr)[:, 0] if ptr is not None else None
            return self._fused(last, positions, tables, extra)
        return self.model.forward_paged(self.model.code_embeddings(last, ptr), positions, self.cache, tables)

    @staticmethod
    def bucket(n: int) -> int:
        for b in BATCH_BUCKETS:
            if n <= b:
                return b
        raise ValueError(f"decode batch {n} exceeds the largest bucket {BATCH_BUCKETS[-1]}")

    def __call__(
        self,
        last: list[int],
        positions: list[int],
        blocks: list[list[int]],
        pointers: list[tuple[int, int, int]] | None = None,
    ) -> Tensor:
        """`pointers`: each row's pointer input (phoneme-pointer models; ARDecoder.pointer_triple)."""
        n, size = len(last), self.bucket(len(last))
        dev = self.cache.k.device
        pad = size - n
        last_t = torch.tensor([[t] for t in last] + [[0]] * pad, device=dev)
        ptr_rows = [[list(p)] for p in pointers] if pointers is not None else [[[0, 0, 0]]] * n
        ptr_t = torch.tensor(ptr_rows + [[[0, 0, 0]]] * pad, dtype=torch.long, device=dev)
        pos_t = torch.tensor([[p] for p in positions] + [[0]] * pad, device=dev)
        bs = self.cache.block_size
        blocks = [b[: p // bs + 1] for b, p in zip(blocks, positions, strict=True)]  # only what holds context
        width = min(self.max_blocks, 1 << (max(len(b) for b in blocks) - 1).bit_length())
        rows = [b + [self.scratch] * (width - len(b)) for b in blocks]
        rows += [[self.scratch] * width] * pad
        tables = torch.tensor(rows, dtype=torch.long, device=dev)
        if not self.cuda_graph:
            return self._fn(last_t, pos_t, tables, ptr_t)[:n]
        entry = self._graphs.get((size, width)) or self._capture(last_t, pos_t, tables, ptr_t)
        graph, s_last, s_pos, s_tables, s_ptr, out = entry
        s_last.copy_(last_t)
        s_pos.copy_(pos_t)
        s_tables.copy_(tables)
        s_ptr.copy_(ptr_t)
        graph.replay()
        return out[:n].clone()  # the graph's output buffer is overwritten by the next replay

    def _capture(
        self, last: Tensor, positions: Tensor, tables: Tensor, pointer: Tensor
    ) -> tuple[torch.cuda.CUDAGraph, Tensor, Tensor, Tensor, Tensor, Tensor]:
        # the warm-up runs and the capture write the same keys and values to the same slots as the replay that
        # follows, so running them is harmless
        static = (last.clone(), positions.clone(), tables.clone(), pointer.clone())
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph, out = capture_cuda_graph(lambda: self._fn(*static), last.device, self._pool)
        entry = (graph, *static, out)
        self._graphs[(last.shape[0], tables.shape[1])] = entry
        return entry


class ARRunner:
    """Owns the model, the paged cache and per-request device state (conditions, seen-token masks)."""

    def __init__(self, model: ARDecoder, cache: PagedKVCache, static_step: StaticDecodeStep | None = None) -> None:
        self.model = model
        self.cache = cache
        self.config = model.config
        self.device = cache.k.device
        self.static_step = static_step
        self._seen: dict[str, Tensor] = {}  # Bool[V] codes already produced (repetition penalty)
        self._last: dict[str, int] = {}
        self._params: dict[str, SamplingParams] = {}
        self._pointer: dict[str, int] = {}  # phoneme-pointer models: each sequence's pointer (host side)
        self._phonemes: dict[str, tuple[int, ...]] = {}

    def forget(self, request_id: str) -> None:
        self._seen.pop(request_id, None)
        self._last.pop(request_id, None)
        self._params.pop(request_id, None)
        self._pointer.pop(request_id, None)
        self._phonemes.pop(request_id, None)

    def _pointer_triple(self, request_id: str) -> tuple[int, int, int]:
        return self.model.pointer_triple(self._phonemes[request_id], self._pointer[request_id])

    def _table(self, items: list[PlanItem]) -> Tensor:
        width = max(len(i.blocks) for i in items)
        rows = [i.blocks + [i.blocks[0]] * (width - len(i.blocks)) for i in items]  # padding is masked
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    @torch.no_grad()
    def execute(self, plan: StepPlan, requests: dict[str, ARRequest]) -> dict[str, int]:
        logits: list[Tensor] = []
        items: list[PlanItem] = []
        if plan.prefill:
            logits.append(self._prefill(plan.prefill, requests))
            items.extend(plan.prefill)
        pointers = [self._pointer_triple(i.request_id) for i in plan.decode] if self.config.advances else None
        if plan.decode and self.static_step is not None:
            logits.append(
                self.static_step(
                    [self._last[i.request_id] for i in plan.decode],
                    [i.position for i in plan.decode],
                    [i.blocks for i in plan.decode],
                    pointers,
                )
            )
            items.extend(plan.decode)
        elif plan.decode:
            last = torch.tensor([[self._last[i.request_id]] for i in plan.decode], device=self.device)
            positions = torch.tensor([[i.position] for i in plan.decode], device=self.device)
            ptr = torch.tensor([[p] for p in pointers], device=self.device) if pointers is not None else None
            x = self.model.code_embeddings(last, ptr)
            logits.append(self.model.forward_paged(x, positions, self.cache, self._table(plan.decode)))
            items.extend(plan.decode)
        if not items:
            return {}
        tokens = self._sample(torch.cat(logits), items)
        out = dict(zip((i.request_id for i in items), tokens.tolist(), strict=True))  # the step's one host sync
        for request_id, token in out.items():
            self._last[request_id] = token
            self._seen[request_id][token] = True
            if self.config.advances:
                end = max(len(self._phonemes[request_id]) - 1, 0)
                self._pointer[request_id] = min(self._pointer[request_id] + self.model.advance(token), end)
        return out

    def _prefill(self, plan: list[PlanItem], requests: dict[str, ARRequest]) -> Tensor:
        """Every admitted prompt in one right-padded forward (the cache's last block takes the padding's keys)
        -> the first-token logits [len(plan), out_vocab]."""
        prompts = []
        for item in plan:
            r = requests[item.request_id]
            self._params[item.request_id] = r.sampling
            self._seen[item.request_id] = torch.zeros(self.config.out_vocab, dtype=torch.bool, device=self.device)
            self._pointer[item.request_id] = 0
            self._phonemes[item.request_id] = tuple(r.phonemes)
            cond = torch.tensor([list(r.cond)], dtype=torch.float32, device=self.device)
            count = torch.tensor([r.token_count or 0], device=self.device)
            phonemes = torch.tensor([list(r.phonemes)], dtype=torch.long, device=self.device)
            prompts.append(self.model.prompt_embeddings(cond, count, phonemes)[0])
        lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        x = torch.nn.utils.rnn.pad_sequence(prompts, batch_first=True)
        positions = torch.arange(x.shape[1], device=self.device)[None].expand(len(plan), -1)
        return self.model.forward_paged(x, positions, self.cache, self._table(plan), lengths)

    def _follow_pointer(self, logits: Tensor, items: list[PlanItem]) -> Tensor:
        """A phoneme-pointer model's rules (host arithmetic on the step's plan): eos is masked while phonemes are
        left; counted rows tilt advances towards the pace that reaches the last phoneme as the count runs out, and
        mask the advances too slow to reach it at all."""
        a, dev = self.config.advances, logits.device
        tilt, floor, left = [], [], []
        for item in items:
            left_ph = len(self._phonemes[item.request_id]) - 1 - self._pointer[item.request_id]
            left_tok = (item.token_count or 0) - item.generated
            left.append(left_ph > 0)
            if item.token_count is None or left_tok <= 0 or left_ph <= 0:
                tilt.append(0.0)
                floor.append(0)
                continue
            need = math.log(left_ph / left_tok * NATURAL_TOKENS_PER_PHONEME)
            tilt.append(max(-PACE_TILT_MAX, min(PACE_TILT_MAX, need)))
            floor.append(min(a - 1, max(0, left_ph - (left_tok - 1) * (a - 1))))  # slowest advance still in time
        eos = self.config.eos
        logits[:, eos] = torch.where(torch.tensor(left, device=dev), float("-inf"), logits[:, eos])
        if not any(tilt) and not any(floor):
            return logits
        advance = torch.arange(logits.shape[1], device=dev) % a
        codes = torch.arange(logits.shape[1], device=dev) < self.config.n_codes
        lam = torch.tensor(tilt, device=dev, dtype=logits.dtype)[:, None]
        slow = codes[None] & (advance[None] < torch.tensor(floor, device=dev)[:, None])
        tilted = logits + torch.where(codes, advance, 0)[None].to(logits.dtype) * lam
        return tilted.masked_fill(slow, float("-inf"))

    def _sample(self, logits: Tensor, items: list[PlanItem]) -> Tensor:
        eos = self.config.eos
        params = [self._params[i.request_id] for i in items]
        dev = self.device
        generated = torch.tensor([i.generated for i in items], device=dev)
        counted = torch.tensor([i.token_count is not None for i in items], device=dev)
        target = torch.tensor([i.token_count or 0 for i in items], device=dev)
        # bos is never an output; eos is masked before a requested count and forced at it
        logits[:, self.config.bos] = float("-inf")
        logits[:, eos] = torch.where(counted & (generated < target), float("-inf"), logits[:, eos])
        if self.config.advances:
            logits = self._follow_pointer(logits, items)
        tokens = sample(
            logits,
            torch.stack([self._seen[i.request_id] for i in items]),
            torch.tensor([p.temperature for p in params], device=dev),
            torch.tensor([p.top_k for p in params], device=dev),
            torch.tensor([p.top_p for p in params], device=dev),
            torch.tensor([p.repetition_penalty for p in params], device=dev),
            torch.tensor([p.seed for p in params], device=dev),
            generated,
        )
        return torch.where(counted & (generated >= target), torch.full_like(tokens, eos), tokens)


class ARDecodeEngine:
    """Scheduler + runner in one loop: `add` requests at any time, `step` until `idle`; `generate` for a batch."""

    def __init__(
        self,
        model: ARDecoder,
        num_blocks: int = 256,
        block_size: int = 16,
        max_batch: int = 64,
        dtype: torch.dtype = torch.float32,
        static: bool = False,
        compile_mode: str | None = None,
        cuda_graph: bool = False,
        kernels: str = "torch",
    ) -> None:
        """`static` pads decode steps to fixed shapes (StaticDecodeStep); `compile_mode` (e.g. "reduce-overhead",
        or "default" with `cuda_graph`) compiles that step and `cuda_graph` captures it per bucket (CUDA only);
        `kernels="triton"` runs small buckets through the fused decode kernels (rtvox.engines.ar_fused).
        The cache gets one scratch block beyond `num_blocks` for padded prefill tokens and padded decode rows."""
        device = next(model.parameters()).device
        self.cache = PagedKVCache(model.config, num_blocks + 1, block_size, device, dtype)
        self.scheduler = ARScheduler(num_blocks, block_size, max_batch, model.config.max_positions)
        step = StaticDecodeStep(model.eval(), self.cache, compile_mode, cuda_graph, kernels) if static else None
        self.runner = ARRunner(model.eval(), self.cache, step)
        self.requests: dict[str, ARRequest] = {}

    def add(self, request: ARRequest) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"request id {request.request_id!r} is already running")
        if len(request.cond) != self.runner.config.cond_dim:
            raise ValueError(f"cond has {len(request.cond)} values; the model takes {self.runner.config.cond_dim}")
        self.scheduler.add(request)
        self.requests[request.request_id] = request

    def step(self) -> list[TokenEvent]:
        plan = self.scheduler.schedule()
        tokens = self.runner.execute(plan, self.requests)
        events = self.scheduler.update(tokens, self.runner.config.eos)
        for event in events:
            if event.finished:
                self.runner.forget(event.request_id)
                del self.requests[event.request_id]
        return events

    def idle(self) -> bool:
        return self.scheduler.idle()

    def stream(self) -> Iterator[TokenEvent]:
        while not self.idle():
            yield from self.step()

    def generate(self, requests: Sequence[ARRequest]) -> dict[str, list[int]]:
        for request in requests:
            self.add(request)
        out: dict[str, list[int]] = {r.request_id: [] for r in requests}
        for event in self.stream():
            if event.token is not None:
                out[event.request_id].append(event.token)
        return out
