"""`rtvox train codec` and `rtvox train ar`: the autoregressive family, in two stages on the packed corpus.

1. codec: the FSQ mel tokenizer and its speaker-conditioned token-to-mel decoder (rtvox.models.codec), on random
   mel segments; loss = L1 + MSE of the reconstructed log-mel.
2. ar: the GPT decoder (rtvox.models.ar) on whole utterances, teacher-forced: the frozen codec turns each mel
   into codes, the GPT predicts them and then eos from [speaker ⊕ α·emotion, token count, phonemes, bos]. The
   count is the true number of codes for 70 % of rows and 0 ("free length") for the rest, so both modes are
   learned; the emotion table trains with it (α = 0 for 10 % of rows, as in the acoustic trainer).

Phoneme-pointer codecs (presets "pointer", "pointer-small", "pointer-tiny"; rtvox.models.codec) also need each
utterance's phoneme durations (`--durations`, made by recipes/train/durations.py from an acoustic snapshot's
aligner): the codec trains on whole utterances with its decoder reading the phonemes along the pointer track, and
the GPT predicts `code · advances + advance` with the pointer fed back at every token.

Both are time-boxed, resumable (state.pt) and write fp16 snapshots, like the other trainers (bf16 autocast on CUDA).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.errors import InputError
from rtvox.models.ar import ARConfig, ARDecoder
from rtvox.models.codec import CodecConfig, MelCodec, pointers_from_durations
from rtvox.models.emotion import EmotionConfig, EmotionTable, fuse_condition
from rtvox.text.vocab import PHRASE, WORD, Vocabulary
from rtvox.training.checkpoint import (
    load_snapshot,
    load_state,
    log_step,
    optimizer_step,
    save_snapshot,
    save_state,
)
from rtvox.training.data import (
    AcousticSet,
    LengthBatcher,
    collate_acoustic,
    drop_ids,
    load_acoustic,
    speaker_references,
)

P_FREE_LENGTH = 0.3  # rows trained without a token count
P_NO_EMOTION = 0.1
VAL_SHARE = 0.03  # sentences held out of training and scored at every save (all their speakers and emotions)
VAL_BATCH = 16
SKIP_SYMBOLS = (WORD, PHRASE)  # boundaries the GPT never sees (a model directory's skip_symbols)


@dataclass
class ARRun:
    """Settings of one codec or GPT training run (CLI flags)."""

    data: Path
    run_dir: Path
    preset: str = "base"
    codec: Path | None = None  # the trained codec snapshot (stage 2 only)
    init: Path | None = None
    minutes: float = 8.0
    max_steps: int = 1_000_000
    batch: int = 32  # codec: segments per batch
    batch_frames: int = 24_000  # ar: mel frames per batch
    segment: int = 128  # codec: mel frames per segment (a multiple of the downsample)
    lr: float = 3e-4
    warmup: int = 500
    seed: int = 0
    device: str = "cuda"
    log_every: int = 100
    save_every_min: float = 2.0
    val_share: float = VAL_SHARE  # share of sentences held out (held_out_sentences)
    # the GPT's speaker input: another neutral clip of the speaker ("neutral", data.NeutralReferences) or the
    # utterance's own embedding ("own", which carries its emotion; the codec always uses its own)
    speaker_ref: str = "neutral"
    durations: Path | None = None  # the corpus's phoneme durations (pointer codecs; recipes/train/durations.py)
    dropout: float = 0.0  # the GPT's (ARConfig.dropout)


def _lr(step: int, run: ARRun) -> float:
    return run.lr * min(1.0, (step + 1) / run.warmup)


def held_out_sentences(data: AcousticSet, share: float = VAL_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows). A sentence is held out with every utterance of it (each speaker and
    emotion; the corpus renders the same text in many voices), chosen by a hash of its phoneme ids, so the split
    is the same on every machine and run and a validation sentence's text is never trained on."""
    picked = np.zeros(len(data), dtype=bool)
    for u in range(len(data)):
        key = hashlib.blake2b(data.ids[data.ph_off[u] : data.ph_off[u + 1]].tobytes(), digest_size=8).digest()
        picked[u] = int.from_bytes(key, "little") % 10_000 < share * 10_000
    rows = np.arange(len(data))
    if picked.all():  # a tiny dataset of one sentence: train on it, validate on nothing
        picked[:] = False
    return rows[~picked], rows[picked]


def _loop(
    run: ARRun,
    modules: dict[str, nn.Module],
    batches: Callable[[], list[np.ndarray]],
    losses_of: Callable[[np.ndarray, int], dict[str, Tensor]],
    identity: dict[str, Any],
    validate: Callable[[], dict[str, float]] | None = None,
    best_key: str | None = None,
) -> dict[str, Any]:
    """The shared time-boxed, checkpointing loop: `losses_of(batch rows, step)` returns {"total": ..., ...};
    `validate()` (modules in eval mode, no gradients) scores the held-out sentences at every save and at the end,
    logged as `val_*` and kept in progress.json. With `best_key` (a validation figure, lower is better) the
    weights of the best score so far are kept in RUN_DIR/best (a small corpus overfits: the GPT's held-out
    cross-entropy turns up long before its training loss stops falling)."""
    best = {"score": math.inf}

    def scored(progress: dict[str, Any]) -> dict[str, Any]:
        if validate is None:
            return progress
        for m in modules.values():
            m.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            val = {f"val_{k}": round(v, 4) for k, v in validate().items()}
        for m in modules.values():
            m.train()
        log_step(run.run_dir, val, {"step": progress["step"]})
        if best_key is not None and f"val_{best_key}" in val and val[f"val_{best_key}"] < best["score"]:
            best["score"] = val[f"val_{best_key}"]
            save_snapshot(run.run_dir / "best", modules, progress | val)
        return progress | val

    t0 = time.monotonic()
    device = torch.device(run.device)
    progress: dict[str, Any] = {"step": 0, "seconds": 0.0, **identity}
    if run.init is not None:
        progress.update(load_snapshot(run.init, modules))
    for m in modules.values():
        m.to(device).train()
    params = [p for m in modules.values() for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=run.lr, betas=(0.9, 0.98), weight_decay=0.01)
    resumed = load_state(run.run_dir, modules, {"opt": opt})
    if resumed is not None:
        progress = resumed
    kept = run.run_dir / "best" / "progress.json"
    if best_key is not None and kept.is_file():  # a resumed run keeps the best score it had
        best["score"] = float(json.loads(kept.read_text("utf-8")).get(f"val_{best_key}", math.inf))
    run.run_dir.mkdir(parents=True, exist_ok=True)
    step, seconds0, last_save = int(progress["step"]), float(progress.get("seconds", 0.0)), time.monotonic()
    done = False
    while not done:
        for rows in batches():
            losses, grad = optimizer_step(opt, params, _lr(step, run), device, functools.partial(losses_of, rows, step))
            step += 1
            elapsed = time.monotonic() - t0
            if step % run.log_every == 0:
                extra = {"step": step, "lr": _lr(step, run), "grad": round(grad, 3), "t": round(elapsed, 1)}
                log_step(run.run_dir, losses, extra)
            progress = {"step": step, "seconds": seconds0 + elapsed, **identity}
            if time.monotonic() - last_save > run.save_every_min * 60:
                save_state(run.run_dir, modules, {"opt": opt}, scored(progress))
                last_save = time.monotonic()
            if elapsed > run.minutes * 60 or step >= run.max_steps:
                done = True
                break
    progress = scored(progress)
    save_state(run.run_dir, modules, {"opt": opt}, progress)
    save_snapshot(run.run_dir / "snapshot", modules, progress)
    print(json.dumps({"final": progress}), flush=True)
    return progress


def _data(run: ARRun) -> AcousticSet:
    vocab = Vocabulary.default()
    return drop_ids(load_acoustic(run.data), {vocab.id(s) for s in SKIP_SYMBOLS})


def ar_config(preset: str, codec: CodecConfig, dropout: float = 0.0) -> ARConfig:
    """The GPT's config for a preset over a codec's tokens (the emotion table is EmotionConfig()); InputError
    for an unknown preset."""
    try:
        return ARConfig.preset(
            preset,
            text_vocab=len(Vocabulary.default()),
            n_codes=codec.n_tokens,
            cond_dim=EmotionConfig().cond_dim,
            advances=codec.advances if codec.pointer else 0,
            dropout=dropout,
        )
    except ValueError as exc:
        raise InputError(str(exc), param="--preset") from None


def codec_config(preset: str) -> CodecConfig:
    """A codec preset's config; InputError for an unknown one."""
    try:
        return CodecConfig.preset(preset)
    except ValueError as exc:
        raise InputError(str(exc), param="--preset") from None


def load_durations(path: Path, data: AcousticSet) -> list[np.ndarray]:
    """Each utterance's phoneme durations (mel frames) from a recipes/train/durations.py file, in `data`'s order;
    InputError when an utterance is missing or its phonemes or frames do not match."""
    try:
        with np.load(path) as z:
            names, ph_len, flat = z["utt"], z["ph_len"], z["dur"]
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise InputError(
            f"{path} is not a durations file (recipes/train/durations.py writes utt, ph_len and dur): {exc}",
            param="--durations",
        ) from None
    offsets = np.concatenate([[0], np.cumsum(ph_len.astype(np.int64))])
    where = {str(u): i for i, u in enumerate(names)}
    out = []
    for u, name in enumerate(data.utt):
        if name not in where:
            raise InputError(f"{path} has no durations for utterance {name!r}: make them from this corpus")
        i = where[name]
        d = flat[offsets[i] : offsets[i + 1]].astype(np.int64)
        if len(d) != data.ph_off[u + 1] - data.ph_off[u] or d.sum() != data.mel_lengths[u]:
            raise InputError(f"{path}: the durations of {name!r} do not fit its phonemes and frames in {data.info}")
        out.append(d)
    return out


def pointer_table(durations: list[np.ndarray], data: AcousticSet, codec: CodecConfig) -> list[np.ndarray]:
    """Each utterance's pointer track over its mel_len // downsample tokens."""
    ds = codec.downsample
    return [
        np.asarray(pointers_from_durations(d.tolist(), int(t) // ds, ds, codec.advances), np.int64)
        for d, t in zip(durations, data.mel_lengths, strict=True)
    ]


def pointer_batch(table: list[np.ndarray], rows: np.ndarray, tokens: int, device: torch.device) -> Tensor:
    """Pointers Long[B, tokens] of `rows`, each padded with its last value."""
    out = np.zeros((len(rows), tokens), np.int64)
    for b, r in enumerate(rows):
        p = table[r][:tokens]
        out[b, : len(p)] = p
        out[b, len(p) :] = p[-1] if len(p) else 0
    return torch.from_numpy(out).to(device)


def pointer_tokens(codes: Tensor, pointers: Tensor, advances: int) -> Tensor:
    """codes and pointers Long[B, M] -> the GPT's tokens code · advances + (p_t - p_{t-1})."""
    steps = torch.diff(pointers, dim=1, prepend=torch.zeros_like(pointers[:, :1]))
    return codes * advances + steps.clamp(0, advances - 1)


def _pointers_for(run: ARRun, data: AcousticSet, codec: CodecConfig) -> list[np.ndarray] | None:
    if not codec.pointer:
        return None
    if run.durations is None:
        raise InputError("a phoneme-pointer codec needs --durations (make them with recipes/train/durations.py)")
    return pointer_table(load_durations(run.durations, data), data, codec)


def _segments(
    data: AcousticSet, rows: np.ndarray, length: int, rng: np.random.Generator, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Random `length`-frame mel windows of the utterances `rows` -> (mel [B, 80, length], ge2e [B, 256])."""
    batch = collate_acoustic(data, rows, torch.device("cpu"))
    mel = torch.full((len(rows), batch["mel"].shape[1], length), math.log(1e-5))
    for b, n in enumerate(batch["mel_len"].tolist()):
        start = int(rng.integers(0, max(1, n - length + 1)))
        take = min(length, n)
        mel[b, :, :take] = batch["mel"][b, :, start : start + take]
    return mel.to(device), batch["ge2e"].to(device)


def train_codec(run: ARRun) -> dict[str, Any]:
    torch.manual_seed(run.seed)
    device = torch.device(run.device)
    data = _data(run)
    config = codec_config(run.preset)
    if run.segment % config.downsample:
        raise ValueError(f"--segment must be a multiple of {config.downsample}")
    codec = MelCodec(config)
    rng = np.random.default_rng(run.seed)
    train_rows, val_rows = held_out_sentences(data, run.val_share)
    pointers = _pointers_for(run, data, config)
    ds = config.downsample
    batcher = LengthBatcher(data.mel_lengths[train_rows], run.batch_frames, run.seed)

    def batches() -> list[np.ndarray]:
        if pointers is not None:  # whole utterances: the decoder reads each one's phonemes
            return [train_rows[b] for b in batcher.epoch()]
        order = rng.permutation(train_rows)
        return [order[i : i + run.batch] for i in range(0, len(order) - run.batch + 1, run.batch)] or [order]

    def whole(rows: np.ndarray) -> tuple[Tensor, Tensor, Tensor]:
        """(reconstruction, target mel, frame mask [B, 1, T]) of whole utterances, T a multiple of downsample."""
        batch = collate_acoustic(data, rows, device)
        t = batch["mel"].shape[2] // ds * ds
        mel, mask = batch["mel"][:, :, :t], batch["frame_mask"][:, None, :t].float()
        text: dict[str, Tensor] = {}
        if pointers is not None:
            text = {"phonemes": batch["ids"], "pointers": pointer_batch(pointers, rows, t // ds, device)}
        out, _ = codec(mel, batch["ge2e"], **text)
        return out.float(), mel, mask

    def validate() -> dict[str, float]:
        """Mel L1 of whole held-out utterances through encode → decode (what the GPT's codes can at best give)."""
        total, frames = 0.0, 0
        for start in range(0, len(val_rows), VAL_BATCH):
            out, mel, mask = whole(val_rows[start : start + VAL_BATCH])
            total += float(((out - mel).abs() * mask).sum()) / mel.shape[1]
            frames += int(mask.sum())
        return {"mel_l1": total / max(frames, 1), "utterances": float(len(val_rows))}

    def losses_of(rows: np.ndarray, step: int) -> dict[str, Tensor]:
        if pointers is not None:
            out, mel, mask = whole(rows)
            n = mask.sum().clamp_min(1) * mel.shape[1]
            l1 = ((out - mel).abs() * mask).sum() / n
            mse = ((out - mel).square() * mask).sum() / n
            return {"total": l1 + mse, "mel_l1": l1, "mel_mse": mse}
        mel, ge2e = _segments(data, rows, run.segment, rng, device)
        out, codes = codec(mel, ge2e)
        l1 = (out.float() - mel).abs().mean()
        mse = (out.float() - mel).square().mean()
        used = torch.tensor(float(codes.unique().numel()) / config.n_codes)
        return {"total": l1 + mse, "mel_l1": l1, "mel_mse": mse, "codebook_use": used}

    identity = {"preset": run.preset, "kind": "codec"}
    return _loop(run, {"codec": codec}, batches, losses_of, identity, validate if len(val_rows) else None, "mel_l1")


def train_ar(run: ARRun) -> dict[str, Any]:
    if run.codec is None:
        raise ValueError("rtvox train ar needs --codec: the snapshot of a trained codec (rtvox train codec)")
    torch.manual_seed(run.seed)
    device = torch.device(run.device)
    data = _data(run)
    codec_progress = json.loads((run.codec / "progress.json").read_text("utf-8"))
    codec = MelCodec(codec_config(codec_progress.get("preset", "base")))
    load_snapshot(run.codec, {"codec": codec})
    codec.to(device).eval().requires_grad_(False)
    config = ar_config(run.preset, codec.config, run.dropout)
    pointers = _pointers_for(run, data, codec.config)
    gpt, table = ARDecoder(config), EmotionTable(EmotionConfig())
    ds = codec.config.downsample
    train_rows, val_rows = held_out_sentences(data, run.val_share)
    batcher = LengthBatcher(data.mel_lengths[train_rows], run.batch_frames, run.seed)

    def batches() -> list[np.ndarray]:
        return [train_rows[b] for b in batcher.epoch()]

    references = speaker_references(data, run.speaker_ref)
    ref_rng = np.random.default_rng(run.seed + 1)

    def losses_of(rows: np.ndarray, step: int, held_out: bool = False) -> dict[str, Tensor]:
        """Teacher-forced loss; `held_out` scores as inference asks: every row with its token count and emotion."""
        refs = None
        if references is not None:  # scoring draws the same references every time
            refs = references.pick(rows, np.random.default_rng(run.seed) if held_out else ref_rng)
        batch = {k: v.to(device) for k, v in collate_acoustic(data, rows, torch.device("cpu"), refs).items()}
        t = batch["mel"].shape[2] // ds * ds
        with torch.no_grad():
            codes = codec.encode(batch["mel"][:, :, :t])  # [B, M]
            if pointers is not None:
                codes = pointer_tokens(codes, pointer_batch(pointers, rows, codes.shape[1], device), config.advances)
        n_codes = batch["mel_len"] // ds  # real codes per row
        m = codes.shape[1]
        real = torch.arange(m, device=device)[None] < n_codes[:, None]
        targets = torch.cat([codes.masked_fill(~real, -100), torch.full_like(codes[:, :1], -100)], dim=1)
        targets.scatter_(1, n_codes[:, None], config.eos)  # eos right after the last real code
        b = len(rows)
        count = n_codes.clamp(max=config.max_count)
        alpha = torch.ones(b, device=device)
        if not held_out:  # training drops the count and the emotion of some rows; scoring draws no random numbers
            free = torch.rand(b, device=device) < P_FREE_LENGTH
            count = torch.where(free, torch.zeros_like(count), count)
            alpha = (torch.rand(b, device=device) >= P_NO_EMOTION).float()
        cond = fuse_condition(batch["ge2e"], table(batch["emotion"]), alpha)
        logits = gpt(cond, count, batch["ids"], codes.masked_fill(~real, 0), batch["ph_len"])
        ce = F.cross_entropy(logits.float().transpose(1, 2), targets, ignore_index=-100)
        with torch.no_grad():
            acc = ((logits.argmax(-1) == targets) & (targets >= 0)).sum() / (targets >= 0).sum()
        return {"total": ce, "ce": ce, "accuracy": acc, "tokens": (targets >= 0).sum()}

    def validate() -> dict[str, float]:
        """Teacher-forced cross-entropy and next-code accuracy on the held-out sentences, token-weighted."""
        ce, acc, tokens = 0.0, 0.0, 0
        order = val_rows[np.argsort(data.mel_lengths[val_rows], kind="stable")]
        for start in range(0, len(order), VAL_BATCH):
            out = losses_of(order[start : start + VAL_BATCH], 0, held_out=True)
            n = int(out["tokens"])
            ce, acc, tokens = ce + float(out["ce"]) * n, acc + float(out["accuracy"]) * n, tokens + n
        return {"ce": ce / max(tokens, 1), "accuracy": acc / max(tokens, 1), "utterances": float(len(val_rows))}

    identity = {
        "preset": run.preset,
        "kind": "ar",
        "n_codes": config.n_codes,
        "codec": str(run.codec),
        "speaker_ref": run.speaker_ref,
        "advances": config.advances,
        "dropout": run.dropout,
    }
    modules = {"ar": gpt, "emotion_table": table}
    return _loop(run, modules, batches, losses_of, identity, validate if len(val_rows) else None, "ce")
