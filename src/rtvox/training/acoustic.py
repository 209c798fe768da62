"""`rtvox train acoustic`: the FastSpeech2 acoustic model, its aligner and the emotion encoder/table, jointly.

One step: the aligner's best monotonic path (hard-EM MAS, training/align.py) → integer durations, frame
pitch/energy averaged per phoneme → condition = GE2E speaker ⊕ α·emotion (the label's table entry, or the
encoder's embedding of the utterance itself, or α = 0 for a share of steps so that α = 0 means "the voice's
neutral style") → teacher-forced FastSpeech2 pass and its losses, plus the emotion encoder as a classifier tied
to the table. bf16 autocast on CUDA; time-boxed runs that checkpoint as they go and resume.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from rtvox.constants import EMOTIONS, SPEAKER_EMBED_DIM
from rtvox.models.acoustic import AcousticModel, acoustic_losses
from rtvox.models.bundle import ModelConfig, load_weights
from rtvox.models.emotion import EmotionEncoder, EmotionTable, fuse_condition
from rtvox.text.vocab import PHRASE, WORD, Vocabulary
from rtvox.training.align import (
    Aligner,
    align_batch,
    flat_start_width,
    hard_alignment,
    phoneme_average,
    utterance_zscore,
)
from rtvox.training.checkpoint import (
    PROGRESS_NAME,
    load_module_state,
    load_snapshot,
    load_state,
    log_step,
    optimizer_step,
    save_snapshot,
    save_state,
)
from rtvox.training.data import (
    AcousticSet,
    CrossLingualReferences,
    LengthBatcher,
    NeutralReferences,
    collate_acoustic,
    describe,
    drop_ids,
    load_acoustic,
    speaker_prosody_stats,
    speaker_references,
)

P_ENCODER_EMOTION = 0.3  # share of rows conditioned on the emotion encoder's embedding of the clip itself
P_NO_EMOTION = 0.1  # share of rows with α = 0


@dataclass
class AcousticRun:
    """Settings of one training run (CLI flags)."""

    data: Path
    run_dir: Path
    preset: str = "small"
    # a weight snapshot to start from, or a shipped model directory (load_model_init: a warm start with a fresh
    # aligner; pair it with aligner_only_steps and a lower lr)
    init: Path | None = None
    snapshot: Path | None = None  # where to write the weight snapshot (default run_dir/snapshot)
    minutes: float = 8.0
    max_steps: int = 1_000_000
    batch_frames: int = 24_000
    lr: float = 1e-3
    warmup: int = 1000
    # frontend symbols left out of the model's input (ModelConfig.skip_symbols): silent word and phrase
    # boundaries, which a learned aligner otherwise lets swallow the frames of neighbouring phonemes
    skip_symbols: tuple[str, ...] = (WORD, PHRASE)
    # width of the aligner's diagonal prior (fraction of the utterance; recipes/train/README.md)
    prior_width: float = 0.05
    flat_start: int = 1500  # steps of near-uniform segmentation before the prior widens (align.flat_start_width)
    # pitch/energy targets as z-scores over the speaker's utterances ("speaker") or over each utterance
    # ("utterance", runs T1-T4): per-utterance scores erase the level and range changes emotions are made of
    prosody_norm: str = "speaker"
    # acoustic model dropout; None keeps the preset's
    dropout: float | None = None
    # AcousticConfig.frame_position: each frame's place inside its phoneme fed to the decoder (its layer starts
    # at zero, so an --init snapshot trained without it loads)
    frame_position: bool = False
    # the first steps train the aligner alone (the other modules get no gradient): a fresh aligner beside a
    # trained acoustic model must learn its durations (flat start included) before the model trains on them
    aligner_only_steps: int = 0
    # whose GE2E embedding conditions a row: "neutral" (another neutral clip of the speaker, as at inference:
    # data.NeutralReferences), "own" (the utterance's own, which carries its emotion; runs up to T11, and T15) or
    # "cross-lingual" (own, half the rows a clip of the other language: data.CrossLingualReferences)
    speaker_ref: str = "neutral"
    # which weights learn: "all", or "emotion" (the emotion encoder and table, and the emotion half of every
    # layer that reads the condition vector; the speaker half, the rest of the acoustic model and the aligner
    # stay as loaded): teaches the label what the speaker input carried without moving how a voice is rendered;
    # "emotion-fixed-neutral" also keeps the neutral row and every layer's response to it (Trainable.restore)
    train_only: str = "all"
    seed: int = 0
    device: str = "cuda"
    log_every: int = 100
    save_every_min: float = 2.0


def _lr(step: int, run: AcousticRun) -> float:
    step = max(step, 1)
    return run.lr * min(step / run.warmup, math.sqrt(run.warmup / step))


# The decoder side a distilled model may have changed (rtvox.training.distill): a warm start from a model
# directory keeps that model's, whatever the preset says
DECODER_SHAPE = ("decoder_layers", "decoder_ff_kernels", "postnet_layers", "postnet_channels", "postnet_kernel")


def run_config(run: AcousticRun, vocab_size: int) -> ModelConfig:
    """The preset's model config with the run's overrides (dropout, frame position); a warm start from a model
    directory takes that model's decoder shape (DECODER_SHAPE)."""
    config = ModelConfig.preset(run.preset, vocab_size=vocab_size, name="rtvox-base")
    acoustic = dataclasses.replace(config.acoustic, frame_position=run.frame_position)
    if run.init is not None and is_model_dir(run.init):
        shipped = json.loads((run.init / "config.json").read_text(encoding="utf-8")).get("acoustic", {})
        shape: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in shipped.items() if k in DECODER_SHAPE
        }
        acoustic = dataclasses.replace(acoustic, **shape)
    if run.dropout is not None:
        acoustic = dataclasses.replace(acoustic, dropout=run.dropout)
    return dataclasses.replace(config, acoustic=acoustic)


# Layers a snapshot may lack because the run adds them (they start as initialized: zero, so the model is unchanged)
NEW_LAYERS = frozenset({"acoustic.frame_pos."})


TRAIN_ONLY = ("all", "emotion", "emotion-fixed-neutral")


@dataclass
class Trainable:
    """The parameters one run optimizes, and what `restore` enforces after each step: frozen slices kept at their
    captured values (the optimizer's weight decay and any stale moments would otherwise move them) and, for
    "emotion-fixed-neutral", each emotion-column change projected off the neutral row (so W·e_neutral, hence
    neutral speech, stays). `capture` records the current weights: at construction, and again after a resume."""

    params: list[Tensor]
    frozen: list[tuple[Tensor, Any]]  # (parameter, index) to keep
    projected: list[Tensor] = dataclasses.field(default_factory=list)  # weights [out, speaker + E]
    neutral: tuple[Tensor, int] | None = None  # (emotion table weight, neutral row) for `projected`
    _kept: list[Tensor] = dataclasses.field(default_factory=list)
    _start: list[Tensor] = dataclasses.field(default_factory=list)

    @torch.no_grad()
    def capture(self) -> None:
        self._kept = [param.detach()[index].clone() for param, index in self.frozen]
        self._start = [w.detach()[:, -self._emotion_dim() :].clone() for w in self.projected]

    def _emotion_dim(self) -> int:
        return 0 if self.neutral is None else self.neutral[0].shape[1]

    @torch.no_grad()
    def restore(self) -> None:
        for (param, index), values in zip(self.frozen, self._kept, strict=True):
            param[index] = values
        if self.neutral is None:
            return
        table, row = self.neutral
        e = table[row]
        for weight, start in zip(self.projected, self._start, strict=True):
            delta = weight[:, -e.shape[0] :] - start
            delta -= (delta @ e)[:, None] * e[None, :] / e.dot(e)
            weight[:, -e.shape[0] :] = start + delta


def trainable(modules: dict[str, torch.nn.Module], train_only: str, speaker_dim: int) -> Trainable:
    """What a run with `train_only` optimizes (see AcousticRun.train_only); the rest gets requires_grad False."""
    if train_only not in TRAIN_ONLY:
        raise ValueError(f"train_only must be one of {', '.join(TRAIN_ONLY)}, got {train_only!r}")
    if train_only == "all":
        return Trainable([p for m in modules.values() for p in m.parameters()], [])
    for m in modules.values():
        m.requires_grad_(False)
    params: list[Tensor] = []
    for name in ("emotion_encoder", "emotion_table"):
        modules[name].requires_grad_(True)
        params += list(modules[name].parameters())
    model = modules["acoustic"]
    assert isinstance(model, AcousticModel)
    learn = Trainable(params, [])
    cond_layers = 0
    if train_only == "emotion-fixed-neutral":
        table = modules["emotion_table"]
        assert isinstance(table, EmotionTable)
        learn.neutral = (table.embeddings.weight, EMOTIONS.index("neutral"))
        learn.frozen.append(learn.neutral)
    for layer in model.modules():
        if isinstance(layer, torch.nn.Linear) and layer.in_features == model.config.cond_dim:
            # cond = speaker ⊕ α·emotion (fuse_condition): columns [:speaker_dim] read the speaker, the bias both
            cond_layers += 1
            layer.weight.requires_grad_(True)
            learn.frozen.append((layer.weight, (slice(None), slice(0, speaker_dim))))
            layer.weight.register_hook(functools.partial(_zero_columns, stop=speaker_dim))
            params.append(layer.weight)
            if learn.neutral is not None:
                learn.projected.append(layer.weight)
    if not cond_layers:
        raise ValueError("--train-only emotion: the acoustic model has no layer that reads the condition vector")
    learn.capture()
    return learn


def _zero_columns(grad: Tensor, stop: int) -> Tensor:
    grad = grad.clone()
    grad[:, :stop] = 0
    return grad


def build_modules(config: ModelConfig, vocab_size: int) -> dict[str, torch.nn.Module]:
    return {
        "acoustic": AcousticModel(config.acoustic),
        "aligner": Aligner(vocab_size, config.n_mels),
        "emotion_encoder": EmotionEncoder(config.emotion),
        "emotion_table": EmotionTable(config.emotion),
    }


def targets(batch: dict[str, Tensor], durations: Tensor, stats: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(hard path [B, T, N], per-phoneme normalized pitch [B, N], energy [B, N]) from frame features;
    z-scores against the speakers' `stats` [n_speakers, 4] (data.speaker_prosody_stats) or, without them,
    against each utterance."""
    path = hard_alignment(durations, batch["mel"].shape[2]) & batch["frame_mask"][:, :, None]
    energy_frames = batch["mel"].mean(1)
    if stats is None:
        pitch_z = utterance_zscore(batch["log_f0"], batch["voiced"])
        energy_z = utterance_zscore(energy_frames, batch["frame_mask"])
    else:
        row = stats[batch["speaker"]]  # [B, 4]
        pitch_z = ((batch["log_f0"] - row[:, 0:1]) / row[:, 1:2]) * batch["voiced"]
        energy_z = ((energy_frames - row[:, 2:3]) / row[:, 3:4]) * batch["frame_mask"]
    pitch = phoneme_average(pitch_z, batch["voiced"].float(), path)
    energy = phoneme_average(energy_z, batch["frame_mask"].float(), path)
    return path, pitch, energy


def train_losses(
    modules: dict[str, torch.nn.Module],
    batch: dict[str, Tensor],
    step: int,
    run: AcousticRun,
    stats: Tensor | None = None,
) -> dict[str, Tensor]:
    """step_losses' losses alone (what one optimizer step needs)."""
    return step_losses(modules, batch, step, run, stats)[0]


def step_losses(
    modules: dict[str, torch.nn.Module],
    batch: dict[str, Tensor],
    step: int,
    run: AcousticRun,
    stats: Tensor | None = None,
) -> tuple[dict[str, Tensor], Tensor]:
    """All losses of one batch (and the durations used)."""
    aligner, model = modules["aligner"], modules["acoustic"]
    assert isinstance(model, AcousticModel)
    mel, ph_len, mel_len = batch["mel"], batch["ph_len"], batch["mel_len"]
    assert isinstance(aligner, Aligner)
    align_loss, durations = align_batch(
        aligner,
        batch["ids"],
        mel,
        ph_len,
        mel_len,
        batch["ph_mask"],
        batch["frame_mask"],
        batch["ge2e"],
        flat_start_width(step, run.prior_width, run.flat_start),
    )
    if step < run.aligner_only_steps:
        return {"align": align_loss, "total": align_loss}, durations
    _path, pitch, energy = targets(batch, durations, stats)

    b = mel.shape[0]
    enc_emb, enc_logits = modules["emotion_encoder"](mel, batch["frame_mask"])
    table_emb = modules["emotion_table"](batch["emotion"])
    r = torch.rand(b, device=mel.device)
    emotion = torch.where((r < P_ENCODER_EMOTION)[:, None], enc_emb, table_emb)
    alpha = (r < 1 - P_NO_EMOTION).float()
    cond = fuse_condition(batch["ge2e"], emotion, alpha)
    out = model.forward_train(batch["ids"], batch["ph_mask"], cond, durations, pitch, energy)
    losses = acoustic_losses(out, mel, durations, pitch, energy)
    losses["align"] = align_loss
    losses["emotion_ce"] = F.cross_entropy(enc_logits.float(), batch["emotion"])
    losses["emotion_tie"] = (1 - F.cosine_similarity(enc_emb.float(), table_emb.float().detach())).mean() + (
        1 - F.cosine_similarity(table_emb.float(), enc_emb.float().detach())
    ).mean()
    losses["total"] = losses["total"] + align_loss + 0.1 * losses["emotion_ce"] + 0.1 * losses["emotion_tie"]
    return losses, durations


def _split(data: AcousticSet, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data))
    n_val = max(1, min(64, len(data) // 50))
    return order[n_val:], order[:n_val]


@torch.no_grad()
def validate(
    modules: dict[str, torch.nn.Module],
    data: AcousticSet,
    index: np.ndarray,
    run: AcousticRun,
    stats: Tensor | None = None,
    references: NeutralReferences | CrossLingualReferences | None = None,
) -> float:
    """Post-net mel L1 over `index`, each row conditioned as in training (`references`: the run's neutral ones)."""
    for m in modules.values():
        m.eval()
    device = torch.device(run.device)
    total, count = 0.0, 0
    rng = np.random.default_rng(run.seed)  # the same references at every validation
    for start in range(0, len(index), 16):
        rows = index[start : start + 16]
        batch = collate_acoustic(data, rows, device, references.pick(rows, rng) if references is not None else None)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            losses, _ = step_losses(modules, batch, 10**9, run, stats)
        total += float(losses["mel_post"]) * len(batch["ids"])
        count += len(batch["ids"])
    for m in modules.values():
        m.train()
    return total / max(count, 1)


def load_acoustic_snapshot(snapshot: Path, data: Path = Path(".")) -> tuple[AcousticRun, dict[str, torch.nn.Module]]:
    """A training snapshot's modules (acoustic model, aligner, emotion encoder and table) on the CPU in eval mode,
    with the run settings its progress.json records (preset, skipped symbols, frame positions): what probes and
    recipes that run the trained model outside the trainer need."""
    progress = json.loads((snapshot / "progress.json").read_text("utf-8"))
    run = AcousticRun(
        data=data,
        run_dir=snapshot,
        preset=progress.get("preset", "small"),
        skip_symbols=tuple(progress.get("skip_symbols", (WORD, PHRASE))),
        frame_position=bool(progress.get("frame_position", False)),
        device="cpu",
    )
    vocab_size = len(Vocabulary.default())
    modules = build_modules(run_config(run, vocab_size), vocab_size)
    load_snapshot(snapshot, modules)
    for module in modules.values():
        module.eval()
    return run, modules


def is_model_dir(path: Path) -> bool:
    """A shipped model directory (config.json beside the weights), as opposed to a training snapshot."""
    return (path / "config.json").is_file() and not (path / PROGRESS_NAME).is_file()


def load_model_init(directory: Path, modules: dict[str, torch.nn.Module], new_layers: frozenset[str]) -> dict[str, Any]:
    """Warm start from a shipped model directory (models/rtvox-small): its acoustic weights, its emotion encoder
    and table (emotion.safetensors, "encoder." / "table." prefixes); the aligner, which a model does not ship,
    stays fresh. Every shipped tensor must fit the run's modules. Returns what progress records of the start."""
    cpu = torch.device("cpu")
    where = f"model {directory}"
    load_module_state(
        modules["acoustic"], load_weights(directory, "acoustic", cpu, torch.float32), "acoustic", new_layers, where
    )
    emotion = load_weights(directory, "emotion", cpu, torch.float32)
    for prefix, name in (("encoder.", "emotion_encoder"), ("table.", "emotion_table")):
        part = {k.removeprefix(prefix): v for k, v in emotion.items() if k.startswith(prefix)}
        load_module_state(modules[name], part, name, new_layers, where)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    return {"init_model": f"{config.get('name', directory.name)} {config.get('version', '')}".strip()}


def train_acoustic(run: AcousticRun) -> dict[str, Any]:
    """Train until `minutes` or `max_steps`; returns the final progress record."""
    t0 = time.monotonic()
    torch.manual_seed(run.seed)
    device = torch.device(run.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(run.data), {vocab.id(symbol) for symbol in run.skip_symbols})
    config = run_config(run, len(vocab))
    modules = build_modules(config, len(vocab))
    if run.prosody_norm not in ("speaker", "utterance"):
        raise ValueError(f"prosody_norm must be 'speaker' or 'utterance', got {run.prosody_norm!r}")
    references = speaker_references(data, run.speaker_ref)
    stats = None
    if run.prosody_norm == "speaker":
        stats = torch.from_numpy(speaker_prosody_stats(data)).to(device)
    identity = {
        "preset": run.preset,
        "skip_symbols": list(run.skip_symbols),
        "prosody_norm": run.prosody_norm,
        "frame_position": run.frame_position,
        "speaker_ref": run.speaker_ref,
        "train_only": run.train_only,
    }
    progress: dict[str, Any] = {"step": 0, "seconds": 0.0, **identity}
    if run.init is not None and is_model_dir(run.init):
        identity.update(load_model_init(run.init, modules, NEW_LAYERS))  # recorded with every progress
        progress.update(identity)
    elif run.init is not None:
        progress.update(load_snapshot(run.init, modules, new_layers=NEW_LAYERS))
    for m in modules.values():
        m.to(device).train()
    if run.train_only != "all" and run.aligner_only_steps:
        raise ValueError("aligner-only steps train the aligner, which --train-only emotion keeps frozen")
    learn = trainable(modules, run.train_only, SPEAKER_EMBED_DIM)
    params = learn.params
    opt = torch.optim.AdamW(params, lr=run.lr, betas=(0.9, 0.98), weight_decay=0.01)
    resumed = load_state(run.run_dir, modules, {"opt": opt})
    if resumed is not None:
        progress = resumed
        learn.capture()  # what is kept is the resumed run's (equal to its start's wherever frozen)
    train_idx, val_idx = _split(data, run.seed)
    batcher = LengthBatcher(data.mel_lengths[train_idx], run.batch_frames, run.seed + progress["step"])
    run.run_dir.mkdir(parents=True, exist_ok=True)
    print(f"acoustic: {describe(data)}; start at step {progress['step']}", flush=True)
    last_save = time.monotonic()
    step = int(progress["step"])
    seconds0 = float(progress.get("seconds", 0.0))
    done = False
    cpu = torch.device("cpu")
    pool = ThreadPoolExecutor(max_workers=2)  # collates the next batches while the GPU runs this one
    ref_rng = np.random.default_rng(run.seed + 7919 * (step + 1))  # references drawn here, in order, not in the pool

    def submit(rows: np.ndarray) -> Any:
        index = train_idx[rows]
        refs = references.pick(index, ref_rng) if references is not None else None
        return pool.submit(collate_acoustic, data, index, cpu, refs)

    while not done:
        batches = batcher.epoch()
        pending = [submit(rows) for rows in batches[:2]]
        for i in range(len(batches)):
            if i + 2 < len(batches):
                pending.append(submit(batches[i + 2]))
            batch = {k: v.to(device, non_blocking=True) for k, v in pending[i].result().items()}
            pending[i] = pending[i].__class__()  # drop the reference so the pinned batch can be freed
            losses, grad_norm = optimizer_step(
                opt, params, _lr(step, run), device, functools.partial(train_losses, modules, batch, step, run, stats)
            )
            learn.restore()
            step += 1
            elapsed = time.monotonic() - t0
            if step % run.log_every == 0:
                extra = {"step": step, "lr": _lr(step, run), "grad": round(grad_norm, 3)}
                log_step(run.run_dir, losses, extra | {"t": round(elapsed, 1)})
            progress = {"step": step, "seconds": seconds0 + elapsed, **identity}
            if time.monotonic() - last_save > run.save_every_min * 60:
                save_state(run.run_dir, modules, {"opt": opt}, progress)
                last_save = time.monotonic()
            if elapsed > run.minutes * 60 or step >= run.max_steps:
                done = True
                break
    pool.shutdown(wait=False, cancel_futures=True)
    progress["val_mel_l1"] = round(validate(modules, data, val_idx, run, stats, references), 4)
    progress["seconds"] = seconds0 + time.monotonic() - t0
    save_state(run.run_dir, modules, {"opt": opt}, progress)
    save_snapshot(run.snapshot or run.run_dir / "snapshot", modules, progress)
    print(json.dumps({"final": progress}), flush=True)
    return progress
