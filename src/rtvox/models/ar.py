"""The autoregressive family's GPT decoder (IndexTTS / GPT-SoVITS style) and its paged KV cache.

One sequence reads, left to right:

    [cond] [count] phoneme_1 … phoneme_N [bos] code_1 … code_M [eos]

`cond` is the speaker ⊕ α·emotion vector (the same condition as the FastSpeech2 family) projected to one
embedding; `count` is the requested number of acoustic tokens (IndexTTS2's duration control; 0 = free length);
phonemes use the shared vocabulary; codes are acoustic tokens of a small codebook over mel frames (~20–25 per
second), predicted by the head. Positions are learned absolute embeddings (export-clean, no buffers).

Phoneme-pointer tokens (`advances = A > 0`, rtvox.models.codec): each token is `code · A + advance`, the advance
moving a pointer through the phonemes; the embedding of every fed token (and of bos, at pointer 0) also gets
the current phoneme, the next one (0 past the end) and the pointer's index, so the model always knows where it
is in the text and decides locally whether to move on. Callers that feed tokens one at a time track the pointer
(`pointer_inputs` for a whole sequence, `pointer_triple` for one step).

Two forwards share the weights:
- `forward` — the whole sequence with a causal mask (training, and the reference for parity tests);
- `forward_paged` — new tokens of many sequences at once against a `PagedKVCache`: prefill (all prompt tokens of
  a sequence) and decode (one token per sequence) are the same call with different shapes. Keys and values are
  written into fixed-size blocks named by each sequence's block table, so sequences of any length share one
  preallocated pool and a decode step has static shapes for a fixed (batch, max blocks) bucket (CUDA graphs).

Attention over the cache gathers each sequence's blocks ([B, blocks × block_size] keys); a fused paged-attention
kernel is the GPU optimization to come, this path is the reference it must match.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.models.codec import pointer_track, split_tokens
from rtvox.models.layers import config_from_dict, config_to_dict


@dataclass(frozen=True)
class ARConfig:
    """Shapes of the GPT decoder; `n_codes` acoustic tokens plus bos/eos make the output vocabulary."""

    text_vocab: int = 325  # phoneme vocabulary (rtvox.text.vocab)
    n_codes: int = 1024  # acoustic codebook size
    cond_dim: int = 384  # speaker (256) ⊕ emotion (128)
    dim: int = 768
    layers: int = 12
    heads: int = 12
    ff_mult: int = 4
    max_positions: int = 2048  # prompt + codes
    max_count: int = 1500  # largest requestable token count (60 s at 25 tokens/s)
    dropout: float = 0.0  # training only: on the embeddings and on each block's attention and feed-forward outputs
    advances: int = 0  # > 0: phoneme-pointer tokens (code · advances + advance) with pointer inputs

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def bos(self) -> int:  # ids of the output vocabulary: codes 0..n_codes-1, then bos, eos
        return self.n_codes

    @property
    def eos(self) -> int:
        return self.n_codes + 1

    @property
    def out_vocab(self) -> int:
        return self.n_codes + 2

    def __post_init__(self) -> None:
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} must be a multiple of heads {self.heads}")
        if self.advances and (self.advances < 2 or self.n_codes % self.advances):
            raise ValueError(f"advances {self.advances} must be ≥ 2 and divide n_codes {self.n_codes}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ARConfig:
        return config_from_dict(cls, data, "ar")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ARConfig:
        presets = {
            "large": dict(dim=1024, layers=12, heads=16),  # ~158 M (152 M read per decode step): the top of ~50-150 M
            "base": {},  # ~90 M parameters (180 MB fp16: more than one GPU call can return, 8 x 16 MiB)
            "medium": dict(dim=640, layers=10, heads=10),  # ~51 M: fp16 weights still come back from the GPU
            "small": dict(dim=512, layers=8, heads=8),  # ~28 M
            "tiny": dict(dim=64, layers=2, heads=4, n_codes=32, max_positions=256, max_count=64, text_vocab=40),
        }
        if name not in presets:
            raise ValueError(f"unknown AR preset {name!r}; choose one of {sorted(presets)}")
        return dataclasses.replace(cls(), **{**presets[name], **overrides})


class PagedKVCache:
    """A preallocated pool of key/value blocks for every layer: k, v [layers, blocks, block_size, heads, head_dim].

    Owns only tensors; which blocks belong to which sequence is the scheduler's business (rtvox.runtime.ar),
    passed in as block tables Long[B, max_blocks] (unused entries may hold any valid block id: they are masked)."""

    def __init__(
        self, config: ARConfig, num_blocks: int, block_size: int, device: torch.device, dtype: torch.dtype
    ) -> None:
        shape = (config.layers, num_blocks, block_size, config.heads, config.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.num_blocks = num_blocks
        self.block_size = block_size

    def write(self, layer: int, k: Tensor, v: Tensor, slots: Tensor) -> None:
        # k, v [T, H, Dh] (T new tokens, flattened); slots Long[T] = block * block_size + offset
        self.k[layer].view(-1, *k.shape[1:]).index_copy_(0, slots, k.to(self.k.dtype))
        self.v[layer].view(-1, *v.shape[1:]).index_copy_(0, slots, v.to(self.v.dtype))

    def gather(self, layer: int, block_tables: Tensor) -> tuple[Tensor, Tensor]:
        # block_tables Long[B, nb] -> k, v [B, nb * block_size, H, Dh]
        b, nb = block_tables.shape
        k = self.k[layer].index_select(0, block_tables.reshape(-1))
        v = self.v[layer].index_select(0, block_tables.reshape(-1))
        return k.reshape(b, nb * self.block_size, *k.shape[2:]), v.reshape(b, nb * self.block_size, *v.shape[2:])


def slot_mapping(block_tables: Tensor, positions: Tensor, block_size: int) -> Tensor:
    """Cache slot of every (sequence, position): block_tables Long[B, nb], positions Long[B, S] -> Long[B, S]."""
    blocks = torch.gather(block_tables, 1, positions // block_size)
    return blocks * block_size + positions % block_size


class Block(nn.Module):
    """Pre-LN transformer block; attention either causal over the input or over a paged cache."""

    def __init__(self, config: ARConfig) -> None:
        super().__init__()
        self.config = config
        self.norm1 = nn.LayerNorm(config.dim)
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.norm2 = nn.LayerNorm(config.dim)
        self.ff = nn.Sequential(
            nn.Linear(config.dim, config.ff_mult * config.dim),
            nn.GELU(),
            nn.Linear(config.ff_mult * config.dim, config.dim),
        )
        self.drop = nn.Dropout(config.dropout)  # identity in eval mode (and in the fused decode kernels)

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.config.heads, self.config.head_dim).unbind(2)
        return q, k, v  # each [B, S, H, Dh]

    def _out(self, x: Tensor, attn: Tensor) -> Tensor:
        x = x + self.drop(self.proj(attn.transpose(1, 2).reshape(x.shape)))
        return x + self.drop(self.ff(self.norm2(x)))

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        # x [B, S, D]; key_mask Bool[B, S] (real tokens); causal within the sequence
        q, k, v = self._qkv(x)
        s = x.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        mask = causal[None, None] & key_mask[:, None, None, :]
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
        return self._out(x, attn)

    def forward_paged(
        self, x: Tensor, layer: int, cache: PagedKVCache, slots: Tensor, block_tables: Tensor, positions: Tensor
    ) -> Tensor:
        # x [B, S, D] new tokens at `positions` [B, S]; keys: every cached position ≤ the query's own
        q, k, v = self._qkv(x)
        b, s = positions.shape
        cache.write(layer, k.reshape(b * s, *k.shape[2:]), v.reshape(b * s, *v.shape[2:]), slots.reshape(-1))
        keys, values = cache.gather(layer, block_tables)  # [B, L, H, Dh]
        key_pos = torch.arange(keys.shape[1], device=x.device)
        mask = key_pos[None, None, None, :] <= positions[:, None, :, None]  # [B, 1, S, L]
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2), keys.transpose(1, 2).to(q.dtype), values.transpose(1, 2).to(q.dtype), attn_mask=mask
        )
        return self._out(x, attn)


class ARDecoder(nn.Module):
    """GPT over [cond, count, phonemes, bos, codes]: next-code logits [.., n_codes + 2]."""

    def __init__(self, config: ARConfig) -> None:
        super().__init__()
        self.config = config
        self.cond = nn.Linear(config.cond_dim, config.dim)
        self.count = nn.Embedding(config.max_count + 1, config.dim)
        self.text = nn.Embedding(config.text_vocab, config.dim)
        self.codes = nn.Embedding(config.out_vocab, config.dim)
        self.pos = nn.Embedding(config.max_positions, config.dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.out_vocab, bias=False)
        if config.advances:
            self.ptr_cur = nn.Embedding(config.text_vocab, config.dim)
            self.ptr_next = nn.Embedding(config.text_vocab, config.dim)
            self.ptr_pos = nn.Embedding(config.max_positions, config.dim)

    # ---------------------------------------------------------------- phoneme pointer
    def pointer_embeddings(self, pointer: Tensor) -> Tensor:
        """pointer Long[..., 3] (current phoneme id, next phoneme id or 0, pointer index) -> [..., D]."""
        index = pointer[..., 2].clamp(0, self.config.max_positions - 1)
        return self.ptr_cur(pointer[..., 0]) + self.ptr_next(pointer[..., 1]) + self.ptr_pos(index)

    def pointer_inputs(self, phonemes: Tensor, ph_len: Tensor, pointers: Tensor) -> Tensor:
        """phonemes Long[B, N], ph_len Long[B], pointers Long[B, M] -> pointer Long[B, M, 3]."""
        last = (ph_len - 1).clamp_min(0)[:, None]
        p = torch.minimum(pointers, last)
        cur = phonemes.gather(1, p)
        nxt = phonemes.gather(1, torch.minimum(p + 1, last))
        nxt = torch.where(p + 1 > last, torch.zeros_like(nxt), nxt)
        return torch.stack([cur, nxt, p], dim=-1)

    @staticmethod
    def pointer_triple(phonemes: list[int] | tuple[int, ...], pointer: int) -> tuple[int, int, int]:
        """The pointer input of one step on the host: (current, next or 0, index)."""
        if not phonemes:
            return 0, 0, 0
        p = max(0, min(pointer, len(phonemes) - 1))
        return phonemes[p], phonemes[p + 1] if p + 1 < len(phonemes) else 0, p

    def advance(self, token: int) -> int:
        """How far a produced token moves the pointer (0 for eos/bos and for plain codes)."""
        if not self.config.advances or token >= self.config.n_codes:
            return 0
        return token % self.config.advances

    # ---------------------------------------------------------------- embeddings
    def prompt_embeddings(self, cond: Tensor, count: Tensor, phonemes: Tensor) -> Tensor:
        """cond [B, C], count Long[B] (0 = free), phonemes Long[B, N] -> [B, 2 + N + 1, D] (ends with bos)."""
        bos = torch.full_like(phonemes[:, :1], self.config.bos)
        count_emb = self.count(count.clamp(0, self.config.max_count))
        parts = [self.cond(cond.to(self.cond.weight.dtype))[:, None], count_emb[:, None]]
        bos_emb = self.codes(bos)
        if self.config.advances:  # bos sits at pointer 0 (padding is id 0, so the real length is the nonzero count)
            ph_len = (phonemes != 0).sum(1).clamp_min(1)
            bos_emb = bos_emb + self.pointer_embeddings(self.pointer_inputs(phonemes, ph_len, torch.zeros_like(bos)))
        return torch.cat([*parts, self.text(phonemes), bos_emb], dim=1)

    def code_embeddings(self, codes: Tensor, pointer: Tensor | None = None) -> Tensor:
        """Embeddings of fed tokens Long[B, S]; a phoneme-pointer model also takes their pointer Long[B, S, 3]."""
        x = self.codes(codes)
        if self.config.advances:
            if pointer is None:
                raise ValueError("a phoneme-pointer model needs the pointer of every fed token")
            x = x + self.pointer_embeddings(pointer)
        return x

    def token_pointers(self, codes: Tensor, phonemes: Tensor, ph_len: Tensor) -> Tensor:
        """Pointer inputs Long[B, M, 3] of a whole token sequence (each token's pointer after it is produced)."""
        _, steps = split_tokens(codes, self.config.advances)
        advances = torch.where(codes < self.config.n_codes, steps, torch.zeros_like(steps))  # eos/bos: no move
        return self.pointer_inputs(phonemes, ph_len, pointer_track(advances, ph_len))

    # ---------------------------------------------------------------- full-sequence forward (training)
    def forward(self, cond: Tensor, count: Tensor, phonemes: Tensor, codes: Tensor, ph_len: Tensor) -> Tensor:
        """Teacher-forced logits. phonemes Long[B, N] (padded, ph_len real), codes Long[B, M] (the targets
        shifted: the code inputs after bos) -> logits [B, M + 1, out_vocab] for code positions 1..M+1.

        Padding inside the prompt is masked, so a sequence's outputs do not depend on the batch's longest
        prompt; positions count real tokens only."""
        b, n = phonemes.shape
        prompt = self.prompt_embeddings(cond, count, phonemes)
        pointer = self.token_pointers(codes, phonemes, ph_len) if self.config.advances else None
        x = torch.cat([prompt, self.code_embeddings(codes, pointer)], dim=1)
        ph_mask = torch.arange(n, device=x.device)[None] < ph_len[:, None]
        ones2 = torch.ones(b, 2, dtype=torch.bool, device=x.device)
        tail = torch.ones(b, 1 + codes.shape[1], dtype=torch.bool, device=x.device)
        key_mask = torch.cat([ones2, ph_mask, tail], dim=1)
        positions = (key_mask.long().cumsum(1) - 1).clamp_min(0)
        x = F.dropout(x + self.pos(positions), self.config.dropout, self.training)
        for block in self.blocks:
            x = block(x, key_mask)
        return self.head(self.norm(x[:, 2 + n :]))

    # ---------------------------------------------------------------- paged forward (inference)
    def forward_paged(
        self, x: Tensor, positions: Tensor, cache: PagedKVCache, block_tables: Tensor, lengths: Tensor | None = None
    ) -> Tensor:
        """x [B, S, D] embeddings of new tokens at positions Long[B, S] -> logits of each row's last one
        [B, out_vocab]. Decode: S = 1. Prefill: S = prompt length; prompts of different lengths go as one batch,
        right-padded, with `lengths` Long[B] (real tokens per row): padded tokens write their keys to the cache's
        scratch block (its last, never handed to a request; nobody reads it) and each row's logits are its last
        real token's. A real token attends only to positions at or before its own, so padding never leaks in."""
        if lengths is None:
            slots = slot_mapping(block_tables, positions, cache.block_size)
        else:
            real = torch.arange(x.shape[1], device=x.device)[None] < lengths[:, None]
            inside = torch.minimum(positions, positions.gather(1, (lengths - 1)[:, None]))  # within the table
            scratch = (cache.num_blocks - 1) * cache.block_size
            slots = torch.where(real, slot_mapping(block_tables, inside, cache.block_size), scratch)
        h = x + self.pos(positions)
        for layer, block in enumerate(self.blocks):
            assert isinstance(block, Block)
            h = block.forward_paged(h, layer, cache, slots, block_tables, positions)
        if lengths is None:
            return self.head(self.norm(h[:, -1]))
        return self.head(self.norm(h[torch.arange(h.shape[0], device=h.device), lengths - 1]))
