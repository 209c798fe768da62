"""Neutral speaker references for acoustic training: each row is conditioned on another neutral clip of its
speaker, so the emotion has to come from the label (training/data.NeutralReferences)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rtvox.training.data import AcousticSet, NeutralReferences, collate_acoustic, speaker_references

from .conftest import PACK_INFO

INFO = PACK_INFO
# speaker a: 3 neutral + 2 happy; b: 1 neutral + 1 happy; c: no neutral clip, 2 sad
SPEAKER = np.array([0, 0, 0, 0, 0, 1, 1, 2, 2])
EMOTION = np.array([0, 0, 0, 1, 1, 0, 1, 2, 2])


def _data() -> AcousticSet:
    u, frames, phonemes = len(SPEAKER), 12, 4
    return AcousticSet(
        info=INFO,
        ids=np.ones(u * phonemes, np.uint16),
        mel=np.full((u * frames, 80), 100, np.uint8),
        f0=np.zeros(u * frames, np.uint8),
        ph_off=np.arange(u + 1) * phonemes,
        mel_off=np.arange(u + 1) * frames,
        ge2e=np.arange(u, dtype=np.float32)[:, None] * np.ones((1, 256), np.float32),  # row i's embedding is all i
        speaker=SPEAKER,
        emotion=EMOTION,
        lang=np.zeros(u, np.int64),
        utt=[f"u{i}" for i in range(u)],
    )


def test_every_row_gets_another_neutral_clip_of_its_speaker() -> None:
    refs = NeutralReferences(_data())
    rng = np.random.default_rng(0)
    seen: dict[int, set[int]] = {i: set() for i in range(len(SPEAKER))}
    for _ in range(200):
        for i, r in zip(range(len(SPEAKER)), refs.pick(np.arange(len(SPEAKER)), rng), strict=True):
            seen[i].add(int(r))
    for i in range(5):  # speaker a: any of its neutral clips but the row itself
        assert seen[i] == {0, 1, 2} - {i}
    assert seen[5] == {5}  # b's only neutral clip has no other: itself
    assert seen[6] == {5}  # b's happy clip: its neutral one
    assert seen[7] == {7} and seen[8] == {8}  # c has no neutral clip: its own


def test_references_are_seeded_and_reach_the_batch() -> None:
    data = _data()
    refs = NeutralReferences(data)
    index = np.array([3, 4, 6, 0])
    first = refs.pick(index, np.random.default_rng(5))
    np.testing.assert_array_equal(first, refs.pick(index, np.random.default_rng(5)))
    batch = collate_acoustic(data, index, torch.device("cpu"), first)
    np.testing.assert_array_equal(batch["ge2e"][:, 0].numpy(), first.astype(np.float32))
    own = collate_acoustic(data, index, torch.device("cpu"))
    np.testing.assert_array_equal(own["ge2e"][:, 0].numpy(), index.astype(np.float32))
    # labels stay the rows' own
    np.testing.assert_array_equal(batch["emotion"].numpy(), EMOTION[index])


def test_neutral_own_keeps_neutral_rows_and_swaps_emotional_ones() -> None:
    refs = speaker_references(_data(), "neutral-own")
    assert refs is not None
    rng = np.random.default_rng(1)
    rows = np.arange(len(SPEAKER))
    seen: dict[int, set[int]] = {i: set() for i in rows}
    for _ in range(200):
        for i, r in zip(rows, refs.pick(rows, rng), strict=True):
            seen[int(i)].add(int(r))
    for i in (0, 1, 2, 5):  # neutral rows: their own clip, always
        assert seen[i] == {i}
    assert seen[3] == seen[4] == {0, 1, 2}  # a's happy rows: any of a's neutral clips
    assert seen[6] == {5}
    assert seen[7] == {7} and seen[8] == {8}  # c has no neutral clip: its own
    assert speaker_references(_data(), "own") is None
    with pytest.raises(ValueError, match="speaker_ref must be one of own, neutral, neutral-own"):
        speaker_references(_data(), "mine")


def test_cross_lingual_references_swap_half_the_rows_to_the_other_language() -> None:
    """--speaker-ref cross-lingual: about half the rows take a clip of the same speaker and emotion in the other
    language (zh ↔ en, mixed → either); rows with no such clip, and the other half, keep their own."""
    from rtvox.training.data import CrossLingualReferences

    data = _data()
    # a: zh 0,1 / en 2 neutral, happy zh 3 / mixed 4; b: neutral zh 5, happy en 6; c: sad zh 7,8 (no other language)
    data.lang = np.array([0, 0, 1, 0, 2, 0, 1, 0, 0])
    refs = speaker_references(data, "cross-lingual")
    assert isinstance(refs, CrossLingualReferences)
    rng = np.random.default_rng(1)
    index = np.arange(len(SPEAKER))
    picks = np.stack([refs.pick(index, rng) for _ in range(400)])  # [draws, rows]
    assert (SPEAKER[picks] == SPEAKER).all() and (EMOTION[picks] == EMOTION).all()
    for row, allowed in {0: {0, 2}, 1: {1, 2}, 2: {2, 0, 1}, 3: {3}, 4: {4, 3}, 5: {5}, 6: {6}, 7: {7}, 8: {8}}.items():
        assert set(picks[:, row].tolist()) == allowed, row
    assert 0.4 < float(np.mean(picks[:, 0] == 2)) < 0.6  # the share
    assert refs.coverage() == pytest.approx(4 / 9)  # rows 0, 1, 2 and the mixed 4 have one in another language
