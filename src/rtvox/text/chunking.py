"""Chunking: cut a token sequence into pieces the model synthesizes one at a time, never inside a word.

A chunk's phonemes are each token's phones followed by the boundary after it, so a chunk of tokens costs
Σ(len(phones) + 1). Every chunk fits `max_phonemes` unless it is a single word that alone is longer. The first
chunk is held to `first_phonemes` so audio can start early: it ends at the first punctuation (#3/#4) that
fits and closes at least `min_first` phonemes, else the last phrase boundary (#2, or an earlier punctuation)
that fits and closes the floor, else the last word that fits (a mid-phrase join rather than a sliver), else the
last boundary that fits. The floor (none by default; a CPU service's is MIN_FIRST_CHUNK_PHONEMES) keeps a reply
that opens with a word or two ("Yes, ...", "你好，...") from starting on a sliver: its audio is the runway the
second chunk must be made in, and a 0.8-s first chunk ran dry before a long second one on a busy 2-core service
(BENCHMARKS.md, "A floor under the first chunk"). Without load (one-shot synthesis, a GPU) the natural cut at the
comma is the better join. Later chunks end at the last sentence end that fits, else the last pause, phrase, or word
boundary. Text that fits the first limit whole stays one chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from rtvox.text.result import Chunk
from rtvox.text.vocab import BOUNDARY_LEVEL


@dataclass(frozen=True)
class Spoken:
    """A token as chunking sees it: phones, the boundary after it, and its span in the normalized text."""

    phonemes: tuple[str, ...]
    boundary: str  # one of vocab.BOUNDARIES
    start: int
    end: int

    @property
    def cost(self) -> int:
        return len(self.phonemes) + 1 if self.phonemes else 0

    @property
    def level(self) -> int:
        return BOUNDARY_LEVEL[self.boundary]


def plan_chunks(
    tokens: Sequence[Spoken], max_phonemes: int, first_phonemes: int, min_first: int = 0
) -> list[tuple[int, int]]:
    """Token index ranges [start, end) of each chunk. `min_first`: the fewest phonemes the first chunk's cut may
    close (0: none; a service on the CPU sets MIN_FIRST_CHUNK_PHONEMES, rtvox.runtime.service.first_chunk_floor)."""
    floor = min_first
    ranges: list[tuple[int, int]] = []
    n = len(tokens)
    start = 0
    while start < n:
        limit = first_phonemes if not ranges else max_phonemes
        total = 0
        end = start
        while end < n and total + tokens[end].cost <= limit:
            total += tokens[end].cost
            end += 1
        if end == n:
            ranges.append((start, n))
            break
        if end == start or all(t.cost == 0 for t in tokens[start:end]):
            end = _through_next_spoken(tokens, start)  # one word longer than the limit is a chunk of its own
        else:
            end = _first_cut(tokens, start, end, floor) if not ranges else _best_cut(tokens, start, end)
        ranges.append((start, end))
        start = end
    return ranges


def _through_next_spoken(tokens: Sequence[Spoken], start: int) -> int:
    end = start
    while end < len(tokens) and tokens[end].cost == 0:
        end += 1
    return min(end + 1, len(tokens))


def _first_spoken(tokens: Sequence[Spoken], start: int, end: int) -> int:
    """Index of the first token with phones in tokens[start:end] (a chunk must end at or after it)."""
    for k in range(start, end):
        if tokens[k].cost:
            return k
    return end


def _first_cut(tokens: Sequence[Spoken], start: int, end: int, floor: int) -> int:
    """End of the first chunk in tokens[start:end]: the first punctuation closing ≥ `floor` phonemes, else the
    last phrase boundary or punctuation closing ≥ `floor`, else the last word (when all of it is ≥ `floor`), else
    the last phrase boundary or punctuation, else all of it."""
    first = _first_spoken(tokens, start, end)
    lead = sum(t.cost for t in tokens[start:first])
    closing = list(itertools.accumulate((t.cost for t in tokens[first:end]), initial=lead))[1:]  # through first+i
    for k in range(first, end):
        if tokens[k].level >= 3 and closing[k - first] >= floor:
            return k + 1
    for k in range(end - 1, first - 1, -1):
        if tokens[k].level >= 2 and closing[k - first] >= floor:
            return k + 1
    if closing[-1] >= floor:
        return end  # no boundary but a word's closes the floor: a join mid-phrase beats a sliver of a first chunk
    for k in range(end - 1, first - 1, -1):
        if tokens[k].level >= 2:
            return k + 1
    return end


def _best_cut(tokens: Sequence[Spoken], start: int, end: int) -> int:
    """End of a later chunk within tokens[start:end]: after the last token with the strongest boundary."""
    first = _first_spoken(tokens, start, end)
    best_level = 0
    best = end
    for k in range(end - 1, first - 1, -1):
        if tokens[k].level > best_level:
            best_level = tokens[k].level
            best = k + 1
            if best_level == 4:
                break
    return best


def check_chunk_caps(
    max_chunk_phonemes: int | None, first_chunk_phonemes: int, min_first_chunk_phonemes: int | None = None
) -> None:
    """ValueError unless both chunk caps of a serving configuration are at least 2 phonemes and the first chunk's
    floor is ≥ 0 (None: the later-chunk cap and the floor are left to the service's defaults)."""
    if min_first_chunk_phonemes is not None and min_first_chunk_phonemes < 0:
        raise ValueError(f"min_first_chunk_phonemes must be ≥ 0, got {min_first_chunk_phonemes}")
    if (max_chunk_phonemes is not None and max_chunk_phonemes < 2) or first_chunk_phonemes < 2:
        raise ValueError(
            f"max_chunk_phonemes and first_chunk_phonemes must be at least 2, got {max_chunk_phonemes} "
            f"and {first_chunk_phonemes}"
        )


def chunk_phonemes(tokens: Sequence[Spoken]) -> tuple[str, ...]:
    """Phones of consecutive tokens with their boundaries; a token with no phones lends its boundary to the
    last."""
    out: list[str] = []
    for token in tokens:
        if token.phonemes:
            out.extend(token.phonemes)
            out.append(token.boundary)
        elif out and token.level > BOUNDARY_LEVEL[out[-1]]:
            out[-1] = token.boundary
    return tuple(out)


def build_chunks(
    text: str, tokens: Sequence[Spoken], max_phonemes: int, first_phonemes: int, min_first: int = 0
) -> tuple[Chunk, ...]:
    """Chunks of `tokens` (plan_chunks); their texts tile `text` (each runs up to the next chunk's first token)."""
    ranges = plan_chunks(tokens, max_phonemes, first_phonemes, min_first)
    chunks = []
    for i, (start, end) in enumerate(ranges):
        phonemes = chunk_phonemes(tokens[start:end])
        if not phonemes:
            continue
        text_start = 0 if i == 0 else tokens[start].start
        text_end = tokens[ranges[i + 1][0]].start if i + 1 < len(ranges) else len(text)
        chunks.append(Chunk(text[text_start:text_end].strip(), phonemes, start, end))
    return tuple(chunks)
