"""The learned-alignment pieces: best monotonic path, forward-sum loss, per-phoneme averages."""

from __future__ import annotations

import numpy as np
import torch

from rtvox.training import align


def _random_logp(rng: np.random.Generator, t: int, n: int) -> np.ndarray:
    return np.log(rng.dirichlet(np.ones(n), size=t))


def test_viterbi_durations_are_monotonic_complete_and_optimal() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 8))
        t = int(rng.integers(n, 14))
        logp = _random_logp(rng, t, n)
        durations = align._viterbi_numpy(logp, n, t)
        assert durations.sum() == t and (durations >= 1).all()
        # brute force over all compositions of t into n positive parts
        best = -np.inf
        stack = [(0, [])]
        while stack:
            used, parts = stack.pop()
            if len(parts) == n - 1:
                parts = [*parts, t - used]
                if parts[-1] >= 1:
                    idx = np.repeat(np.arange(n), parts)
                    best = max(best, logp[np.arange(t), idx].sum())
                continue
            for d in range(1, t - used - (n - len(parts) - 1) + 1):
                stack.append((used + d, [*parts, d]))
        idx = np.repeat(np.arange(n), durations)
        assert np.isclose(logp[np.arange(t), idx].sum(), best)


def test_monotonic_durations_batches_and_pads() -> None:
    # A sharp diagonal attention: 2 frames per phoneme for row 0 (3 phonemes), 1 per phoneme for row 1 (2).
    log_attn = torch.full((2, 6, 3), -20.0)
    for t in range(6):
        log_attn[0, t, t // 2] = 0.0
    log_attn[1, 0, 0] = log_attn[1, 1, 1] = 0.0
    durations = align.monotonic_durations(log_attn, torch.tensor([3, 2]), torch.tensor([6, 2]))
    assert durations.tolist() == [[2, 2, 2], [1, 1, 0]]


def test_forward_sum_loss_prefers_the_right_alignment() -> None:
    n, t = 3, 6
    good = torch.full((1, t, n), -10.0)
    for i in range(t):
        good[0, i, i // 2] = 10.0
    reverse = good.flip(2)  # attends to phonemes in reverse order: no monotonic path fits
    lengths = (torch.tensor([n]), torch.tensor([t]))
    assert align.forward_sum_loss(good, *lengths) < align.forward_sum_loss(reverse, *lengths) - 1.0


def test_phoneme_average_and_hard_alignment() -> None:
    durations = torch.tensor([[2, 1, 0]])
    path = align.hard_alignment(durations, 4)
    assert path[0].int().tolist() == [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]]
    values = torch.tensor([[1.0, 3.0, 5.0, 7.0]])
    weights = torch.tensor([[1.0, 0.0, 1.0, 1.0]])  # frame 1 unvoiced
    assert align.phoneme_average(values, weights, path).tolist() == [[1.0, 5.0, 0.0]]


def test_utterance_zscore_ignores_masked_frames() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[True, True, True, False]])
    z = align.utterance_zscore(values, mask)
    assert z[0, 3] == 0 and abs(float(z[0, :3].mean())) < 1e-6 and z[0, 0] < 0 < z[0, 2]


def _synthetic_batch(rng: np.random.Generator, templates: torch.Tensor, batch: int) -> dict[str, torch.Tensor]:
    """Utterances of random phonemes (ids 1..V-1) with random durations; each frame = its phoneme's mel
    template + noise. Returns padded ids/mel and the true durations."""
    rows = []
    for _ in range(batch):
        n = int(rng.integers(5, 11))
        ids = rng.integers(1, templates.shape[0], n)
        dur = rng.integers(2, 9, n)
        rows.append((ids, dur))
    n_max = max(len(i) for i, _ in rows)
    t_max = max(int(d.sum()) for _, d in rows)
    ids_t = torch.zeros(batch, n_max, dtype=torch.long)
    dur_t = torch.zeros(batch, n_max, dtype=torch.long)
    mel = torch.full((batch, templates.shape[1], t_max), -11.5)
    for b, (ids, dur) in enumerate(rows):
        ids_t[b, : len(ids)] = torch.from_numpy(ids)
        dur_t[b, : len(dur)] = torch.from_numpy(dur)
        frames = templates[torch.from_numpy(np.repeat(ids, dur))].T
        mel[b, :, : frames.shape[1]] = frames + 0.3 * torch.randn_like(frames)
    ph_len = (ids_t > 0).sum(1)
    return {"ids": ids_t, "mel": mel, "ph_len": ph_len, "mel_len": dur_t.sum(1), "ph_mask": ids_t > 0, "dur": dur_t}


def test_aligner_learns_the_true_durations() -> None:
    """The trainer's alignment step, trained alone on data whose alignment is known, must find it (a blank
    class that outbids every phoneme once made it learn nothing: durations of 1 frame and a few huge ones)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vocab, n_mels = 12, 20
    templates = torch.randn(vocab, n_mels) * 2.0 - 5.0
    aligner = align.Aligner(vocab, n_mels, dim=64, att_dim=32)
    opt = torch.optim.Adam(aligner.parameters(), lr=3e-3)
    for _ in range(150):
        b = _synthetic_batch(rng, templates, 8)
        loss, _, _ = align.align_batch(aligner, b["ids"], b["mel"], b["ph_len"], b["mel_len"], b["ph_mask"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    b = _synthetic_batch(np.random.default_rng(1), templates, 16)
    with torch.no_grad():
        _, _, durations = align.align_batch(aligner, b["ids"], b["mel"], b["ph_len"], b["mel_len"], b["ph_mask"])
    real = b["ph_mask"]
    exact = (durations == b["dur"])[real].float().mean()
    close = ((durations - b["dur"]).abs() <= 1)[real].float().mean()
    # measured: 75 % exact, 84 % within a frame; with the blank beside raw energies, 47 % and 70 %
    assert exact >= 0.65 and close >= 0.8, f"{float(exact):.0%} exact, {float(close):.0%} within one frame"
