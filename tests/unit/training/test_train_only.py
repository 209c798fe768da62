"""`rtvox train acoustic --train-only emotion`: only the emotion encoder, table and the emotion columns of the
layers that read the condition vector learn; the speaker columns, every other acoustic weight and the aligner
stay exactly as loaded."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from rtvox.constants import SPEAKER_EMBED_DIM
from rtvox.models.acoustic import AcousticModel
from rtvox.text.vocab import Vocabulary
from rtvox.training.acoustic import AcousticRun, build_modules, run_config, train_losses, trainable
from rtvox.training.checkpoint import optimizer_step
from rtvox.training.data import AcousticSet, collate_acoustic

from .conftest import PACK_INFO


def _data(vocab_size: int) -> AcousticSet:
    rng = np.random.default_rng(0)
    u, frames, phonemes = 6, 40, 8
    return AcousticSet(
        info=PACK_INFO,
        ids=rng.integers(5, vocab_size, u * phonemes).astype(np.uint16),
        mel=rng.integers(0, 256, (u * frames, 80)).astype(np.uint8),
        f0=rng.integers(0, 256, u * frames).astype(np.uint8),
        ph_off=np.arange(u + 1) * phonemes,
        mel_off=np.arange(u + 1) * frames,
        ge2e=rng.standard_normal((u, 256)).astype(np.float32),
        speaker=np.array([0, 0, 1, 1, 2, 2]),
        emotion=np.array([0, 1, 0, 2, 1, 2]),
        lang=np.zeros(u, np.int64),
        utt=[f"u{i}" for i in range(u)],
    )


def _train(train_only: str, steps: int = 3) -> tuple[dict[str, torch.nn.Module], dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    run = AcousticRun(data=Path("."), run_dir=Path("."), preset="tiny", device="cpu", train_only=train_only, lr=1e-2)
    vocab = Vocabulary.default()
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    before = {f"{k}.{n}": p.detach().clone() for k, m in modules.items() for n, p in m.named_parameters()}
    learn = trainable(modules, train_only, SPEAKER_EMBED_DIM)
    opt = torch.optim.AdamW(learn.params, lr=run.lr, weight_decay=0.01)
    data = _data(len(vocab))
    batch = collate_acoustic(data, np.arange(6), torch.device("cpu"))
    for step in range(steps):
        compute = functools.partial(train_losses, modules, batch, 10_000 + step, run, None)
        optimizer_step(opt, learn.params, run.lr, torch.device("cpu"), compute)
        learn.restore()
    return modules, before


def test_emotion_only_moves_the_emotion_half_and_nothing_else() -> None:
    modules, before = _train("emotion")
    model = modules["acoustic"]
    assert isinstance(model, AcousticModel)
    cond_layers = {
        f"acoustic.{n}.weight"
        for n, layer in model.named_modules()
        if isinstance(layer, torch.nn.Linear) and layer.in_features == model.config.cond_dim
    }
    assert "acoustic.cond_proj.weight" in cond_layers and len(cond_layers) > 2  # the encoder's conditional norms too
    after = {f"{k}.{n}": p.detach() for k, m in modules.items() for n, p in m.named_parameters()}
    for name, value in after.items():
        if name in cond_layers:
            speaker, old = value[:, :SPEAKER_EMBED_DIM], before[name][:, :SPEAKER_EMBED_DIM]
            torch.testing.assert_close(speaker, old, rtol=0, atol=0)
            assert not torch.equal(value[:, SPEAKER_EMBED_DIM:], before[name][:, SPEAKER_EMBED_DIM:]), name
        elif name.startswith(("emotion_table.", "emotion_encoder.")):
            continue
        else:
            torch.testing.assert_close(value, before[name], rtol=0, atol=0, msg=f"{name} moved")
    assert not torch.equal(after["emotion_table.embeddings.weight"], before["emotion_table.embeddings.weight"])


def test_all_moves_the_decoder_and_the_speaker_columns() -> None:
    modules, before = _train("all")
    after = {f"{k}.{n}": p.detach() for k, m in modules.items() for n, p in m.named_parameters()}
    decoder = [n for n in after if n.startswith("acoustic.decoder.")]
    assert decoder and any(not torch.equal(after[n], before[n]) for n in decoder)
    w = "acoustic.cond_proj.weight"
    assert not torch.equal(after[w][:, :SPEAKER_EMBED_DIM], before[w][:, :SPEAKER_EMBED_DIM])


def test_unknown_train_only_is_refused(tmp_path: Path) -> None:
    vocab = Vocabulary.default()
    run = AcousticRun(data=tmp_path, run_dir=tmp_path, preset="tiny", device="cpu")
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    with pytest.raises(ValueError, match="train_only must be one of all, emotion"):
        trainable(modules, "decoder", SPEAKER_EMBED_DIM)


def test_fixed_neutral_keeps_every_layer_response_to_the_neutral_row() -> None:
    from rtvox.constants import EMOTIONS

    modules, before = _train("emotion-fixed-neutral")
    model = modules["acoustic"]
    assert isinstance(model, AcousticModel)
    row = EMOTIONS.index("neutral")
    table = "emotion_table.embeddings.weight"
    after = {f"{k}.{n}": p.detach() for k, m in modules.items() for n, p in m.named_parameters()}
    neutral = before[table][row]
    torch.testing.assert_close(after[table][row], neutral, rtol=0, atol=0)
    assert not torch.equal(after[table][row + 1], before[table][row + 1])  # the other labels learn
    s = SPEAKER_EMBED_DIM
    for n, layer in model.named_modules():
        if isinstance(layer, torch.nn.Linear) and layer.in_features == model.config.cond_dim:
            name = f"acoustic.{n}.weight"
            response, loaded = after[name][:, s:] @ neutral, before[name][:, s:] @ neutral
            torch.testing.assert_close(response, loaded, rtol=1e-5, atol=1e-6)
            assert not torch.equal(after[name][:, s:], before[name][:, s:]), name
            torch.testing.assert_close(after[name][:, :s], before[name][:, :s], rtol=0, atol=0)


def test_capture_after_a_resume_keeps_the_resumed_weights() -> None:
    torch.manual_seed(0)
    run = AcousticRun(data=Path("."), run_dir=Path("."), preset="tiny", device="cpu")
    vocab = Vocabulary.default()
    modules = build_modules(run_config(run, len(vocab)), len(vocab))
    learn = trainable(modules, "emotion-fixed-neutral", SPEAKER_EMBED_DIM)  # captures the fresh weights
    model = modules["acoustic"]
    assert isinstance(model, AcousticModel)
    with torch.no_grad():  # what load_state does on a resume: other values into the same parameters
        for p in model.parameters():
            p.add_(0.5)
    resumed = model.cond_proj.weight.detach().clone()
    learn.capture()
    learn.restore()
    torch.testing.assert_close(model.cond_proj.weight.detach(), resumed, rtol=0, atol=1e-6)
