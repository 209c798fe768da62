"""Length regulator: exact targets, speed, masks, padding."""

from __future__ import annotations

import itertools

import torch

from rtvox.models.variance import (
    fit_durations,
    free_durations,
    length_regulate,
    regulate_durations,
    remainder_rank,
)


def _random_case(seed: int, b: int = 8, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, n + 1, (b,), generator=g)
    mask = torch.arange(n)[None, :] < lengths[:, None]
    frames = torch.rand(b, n, generator=g) * torch.randint(0, 15, (b, n), generator=g)  # some exact zeros
    return frames * mask, mask


def test_fit_hits_target_exactly_for_many_random_durations() -> None:
    for seed in range(200):
        frames, mask = _random_case(seed)
        g = torch.Generator().manual_seed(1000 + seed)
        target = torch.randint(1, 400, (frames.shape[0],), generator=g)
        d = fit_durations(frames, mask, target)
        assert torch.equal(d.sum(1), target), seed
        assert (d >= 0).all() and (d[~mask] == 0).all()
        enough = target >= mask.sum(1)
        assert (d[enough[:, None] & mask] >= 1).all(), "every real phoneme keeps a frame when the target allows"


def test_fit_is_proportional_within_one_frame() -> None:
    frames = torch.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    d = fit_durations(frames, mask, torch.tensor([104]))
    # 4 base frames + 100 shared in proportion 1:2:3:4 (eps aside) -> 10/20/30/40
    assert d.tolist() == [[11, 21, 31, 41, 0]]


def test_fit_ties_go_to_earlier_phonemes_deterministically() -> None:
    frames = torch.full((1, 4), 2.0)
    mask = torch.ones(1, 4, dtype=torch.bool)
    assert fit_durations(frames, mask, torch.tensor([6])).tolist() == [[2, 2, 1, 1]]


def test_remainder_rank_is_a_permutation() -> None:
    values = torch.tensor([[0.5, 0.5, 0.9, -1.0, 0.1]])
    assert remainder_rank(values).tolist() == [[1, 2, 0, 4, 3]]


def test_free_durations_round_speed_and_keep_one_frame() -> None:
    frames = torch.tensor([[0.1, 3.0, 7.0, 5.0]])
    mask = torch.tensor([[True, True, True, False]])
    assert free_durations(frames, mask, torch.tensor([1.0])).tolist() == [[1, 3, 7, 0]]
    assert free_durations(frames, mask, torch.tensor([2.0])).tolist() == [[1, 2, 4, 0]]  # 1.5 rounds to even
    assert free_durations(frames, mask, torch.tensor([0.5])).tolist() == [[1, 6, 14, 0]]


def test_speed_scaling_is_monotone() -> None:
    frames, mask = _random_case(7, b=16)
    speeds = torch.linspace(0.5, 2.0, 13)
    totals = [free_durations(frames, mask, s.expand(16)).sum(1) for s in speeds]
    for slow, fast in itertools.pairwise(totals):
        assert (fast <= slow).all()
    assert (totals[0] > totals[-1]).any()


def test_regulate_picks_mode_per_row() -> None:
    frames, mask = _random_case(3, b=4)
    target = torch.tensor([0, 50, 0, 9])
    d = regulate_durations(frames, mask, torch.ones(4), target)
    assert d.sum(1)[1] == 50 and d.sum(1)[3] == 9
    assert torch.equal(d[0], free_durations(frames, mask, torch.ones(4))[0])


def test_length_regulate_matches_repeat_interleave_and_masks() -> None:
    frames, mask = _random_case(11, b=5, n=9)
    d = free_durations(frames, mask, torch.ones(5))
    hidden = torch.randn(5, 9, 3)
    n_frames = int(d.sum(1).max())
    out, frame_mask, lengths = length_regulate(hidden, d, n_frames)
    assert out.shape == (5, n_frames, 3)
    assert torch.equal(lengths, d.sum(1))
    assert torch.equal(frame_mask, torch.arange(n_frames)[None] < lengths[:, None])
    for b in range(5):
        expected = torch.repeat_interleave(hidden[b], d[b], dim=0)
        assert torch.equal(out[b, : lengths[b]], expected)
        assert (out[b, lengths[b] :] == 0).all()


def test_padding_phonemes_produce_no_frames() -> None:
    hidden = torch.zeros(1, 4, 2)
    hidden[0, 3] = 99.0  # a padding phoneme with a value that must never appear
    d = torch.tensor([[2, 1, 3, 0]])
    out, frame_mask, _ = length_regulate(hidden, d, 8)
    assert not (out == 99.0).any()
    assert frame_mask.sum() == 6


def test_length_regulate_with_a_bucket_cuts_and_pads() -> None:
    hidden = torch.arange(3.0).view(1, 3, 1)
    d = torch.tensor([[2, 2, 2]])
    out, frame_mask, lengths = length_regulate(hidden, d, 4)
    assert out.flatten().tolist() == [0.0, 0.0, 1.0, 1.0] and lengths.item() == 4
    out, frame_mask, lengths = length_regulate(hidden, d, 10)
    assert frame_mask.sum() == 6 and out.shape[1] == 10
