"""Distil a model's frame-rate decoder into a lighter one (`rtvox train distill-decoder`).

The decoder (FFT blocks at 93.75 frames/s, the mel projection, the postnet) is most of the acoustic model's cost
on a CPU. A student with fewer blocks, a shorter FFN kernel and/or no postnet is initialized from the teacher (the
kept blocks; each shortened convolution refitted by least squares to the teacher's full-kernel output on the
teacher's own inputs) and trained to reproduce the teacher's final mel from the teacher's own encoder output: the
pairs are made by the teacher itself from any text, so no corpus is needed, and the encoder, variance adaptor,
vocoder, voices and emotion table stay the teacher's, bit for bit.

Pairs: each text becomes a request with a random built-in voice (or a blend of two, or the GE2E embedding of one
of the given reference clips, so the conditions cloning asks for are seen), emotion label and speed; every chunk
of it is encoded as the runtime does (`Synthesizer.prepare`, the runtime's encode rows) and decoded by the teacher.
Training (dropout off): masked L1 against the teacher's mel plus each student block's relative squared error
against the teacher block it came from; AdamW with a cosine schedule, length-sorted batches of about
`batch_frames` frames; a checkpoint every `save_every` steps (state, optimizer and step) so a stopped run resumes
where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from rtvox.constants import EMOTIONS
from rtvox.errors import InputError
from rtvox.models.acoustic import AcousticConfig, AcousticModel
from rtvox.models.bundle import CONFIG_NAME, ModelBundle, save_weights
from rtvox.training.prosody_prior import update_config

DECODER_PREFIXES = ("decoder.", "mel_out.", "frame_pos.", "postnet.")
EMOTION_CHOICES: tuple[str | None, ...] = (None, *EMOTIONS)  # neutral twice as often as each other label
SPEED_RANGE = (0.8, 1.25)
BLEND_SHARE = 0.3  # share of pairs whose voice is a blend of two built-in voices
FIT_PAIRS = 1000  # training chunks the least-squares kernel refit reads


def student_kernel(config: AcousticConfig) -> int:
    """A model's decoder FFN kernel (the first convolution's)."""
    return (config.decoder_ff_kernels or config.ff_kernels)[0]


@dataclass(frozen=True)
class StudentShape:
    """Which teacher decoder blocks the student keeps (in order), its FFN kernel and whether it keeps a postnet."""

    keep_blocks: tuple[int, ...]
    ff_kernel: int
    postnet: bool

    def check(self, teacher: AcousticConfig) -> None:
        kernel = student_kernel(teacher)
        if not self.keep_blocks or any(not 0 <= b < teacher.decoder_layers for b in self.keep_blocks):
            raise InputError(
                f"keep blocks {list(self.keep_blocks)}: give indices of the teacher's {teacher.decoder_layers} "
                f"decoder blocks (0..{teacher.decoder_layers - 1})",
                param="keep",
            )
        if len(set(self.keep_blocks)) != len(self.keep_blocks):
            raise InputError(f"keep blocks {list(self.keep_blocks)} repeat a block", param="keep")
        if self.ff_kernel < 1 or self.ff_kernel % 2 == 0 or self.ff_kernel > kernel:
            raise InputError(
                f"ff kernel {self.ff_kernel}: give an odd size from 1 to the teacher's {kernel}", param="kernel"
            )
        if self.postnet and teacher.postnet_layers == 0:
            raise InputError("the teacher has no postnet to keep; pass --no-postnet", param="postnet")


@dataclass
class Pair:
    """One chunk: the teacher encoder's hidden [N, D], durations [N] and its decoder's mel [n_mels, T]."""

    hidden: Tensor
    durations: Tensor
    mel: Tensor

    @property
    def frames(self) -> int:
        return int(self.mel.shape[1])


def student_config(teacher: AcousticConfig, shape: StudentShape) -> AcousticConfig:
    shape.check(teacher)
    second = (teacher.decoder_ff_kernels or teacher.ff_kernels)[1]
    return dataclasses.replace(
        teacher,
        decoder_layers=len(shape.keep_blocks),
        decoder_ff_kernels=(shape.ff_kernel, second),
        postnet_layers=teacher.postnet_layers if shape.postnet else 0,
    )


def student_from_teacher(teacher: AcousticModel, shape: StudentShape) -> AcousticModel:
    """A student AcousticModel initialized from `teacher`: every non-decoder weight copied, the kept blocks
    renumbered, each decoder convolution's centre `ff_kernel` taps, the postnet kept or dropped."""
    config = student_config(teacher.config, shape)
    trim = (student_kernel(teacher.config) - shape.ff_kernel) // 2
    state: dict[str, Tensor] = {}
    for key, value in teacher.state_dict().items():
        if key.startswith("postnet.") and not shape.postnet:
            continue
        if key.startswith("decoder.blocks."):
            index = int(key.split(".")[2])
            if index not in shape.keep_blocks:
                continue
            key = f"decoder.blocks.{shape.keep_blocks.index(index)}." + key.split(".", 3)[3]
            if value.dim() == 3 and value.shape[-1] > shape.ff_kernel and trim:
                value = value[..., trim : value.shape[-1] - trim]
        state[key] = value.detach().clone().float()
    student = AcousticModel(config)
    student.load_state_dict(state, strict=True)
    return student


def first_conv(model: AcousticModel, block: int) -> torch.nn.Conv1d:
    """Decoder block `block`'s first FFN convolution (the one with the long kernel)."""
    conv = model.decoder.blocks[block].ffn.conv1  # type: ignore[union-attr]
    assert isinstance(conv, torch.nn.Conv1d)
    return conv


def fit_kernels(
    teacher: AcousticModel, student: AcousticModel, shape: StudentShape, pairs: Sequence[Pair], batch_frames: int
) -> bool:
    """Refit each shortened FFN convolution of `student` by least squares: the `shape.ff_kernel`-tap kernel
    (and bias) whose output on the teacher's own inputs to that convolution is closest to the teacher's
    full-kernel output, over every real frame of `pairs`. Neighbouring frames are strongly correlated (a phoneme
    lasts ~8 frames), so the outer taps' share largely moves onto the kept ones, where cropping drops it.
    False (nothing done) when the student keeps the teacher's kernel."""
    k = shape.ff_kernel
    if k == student_kernel(teacher.config):
        return False
    device = next(student.parameters()).device
    convs = [first_conv(teacher, i) for i in shape.keep_blocks]
    dim = convs[0].in_channels
    gram = [torch.zeros(dim * k + 1, dim * k + 1, dtype=torch.float64, device=device) for _ in convs]
    cross = [torch.zeros(c.out_channels, dim * k + 1, dtype=torch.float64, device=device) for c in convs]
    frame_mask: list[Tensor] = []

    def hook(j: int) -> Callable[[torch.nn.Module, tuple[Tensor, ...], Tensor], None]:
        def grab(_: torch.nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
            x = torch.nn.functional.pad(inputs[0], (k // 2, k // 2)).unfold(2, k, 1)  # [B, D, T, k]
            keep = frame_mask[0].reshape(-1)
            z = x.permute(0, 2, 1, 3).reshape(-1, dim * k)[keep].double()
            z = torch.cat([z, torch.ones_like(z[:, :1])], 1)
            y = output.transpose(1, 2).reshape(-1, output.shape[1])[keep].double()
            gram[j] += z.T @ z
            cross[j] += y.T @ z

        return grab

    handles = [c.register_forward_hook(hook(j)) for j, c in enumerate(convs)]
    try:
        with torch.inference_mode():
            for idx in batches(pairs, batch_frames, random.Random(0)):
                hidden, durations, _, mask = collate([pairs[i] for i in idx], device)
                frame_mask[:] = [mask]
                teacher.decode_masked(hidden, durations, mask)
    finally:
        for h in handles:
            h.remove()
    with torch.no_grad():
        for j in range(len(shape.keep_blocks)):
            ridge = 1e-4 * gram[j].diagonal().mean() * torch.eye(gram[j].shape[0], dtype=torch.float64, device=device)
            fit = torch.linalg.solve(gram[j] + ridge, cross[j].T).T  # [out, D * k + 1]
            conv = first_conv(student, j)
            conv.weight.copy_(fit[:, :-1].reshape(conv.weight.shape).to(conv.weight.dtype))
            assert conv.bias is not None
            conv.bias.copy_(fit[:, -1].to(conv.bias.dtype))
    return True


@dataclass(frozen=True)
class PairSettings:
    """One pair's request: a built-in voice, or a blend (a, b, weight of a) of two, or reference clip number
    `clip`; an emotion label; a speed."""

    voice: str
    emotion: str | None
    speed: float
    blend: tuple[str, str, float] | None = None
    clip: int | None = None


def request_settings(
    rng: random.Random,
    voices: Sequence[str],
    emotions: Sequence[str | None] = EMOTION_CHOICES,
    *,
    clips: int = 0,
    clip_share: float = 0.0,
) -> PairSettings:
    """A random voice (with probability `clip_share`, when there are `clips` reference clips, one of them; else a
    built-in voice or a two-voice blend), emotion (drawn from `emotions`; None = neutral) and speed for one pair's
    request."""
    speed = round(rng.uniform(*SPEED_RANGE), 3)
    emotion = rng.choice(emotions)
    if clips > 0 and rng.random() < clip_share:
        return PairSettings("", emotion, speed, clip=rng.randrange(clips))
    if len(voices) > 1 and rng.random() < BLEND_SHARE:
        a, b = rng.sample(list(voices), 2)
        return PairSettings(a, emotion, speed, blend=(a, b, round(rng.uniform(0.25, 0.75), 3)))
    return PairSettings(rng.choice(list(voices)), emotion, speed)


def make_pairs(
    teacher_dir: Path,
    texts: Sequence[str],
    *,
    seed: int,
    device: str = "cpu",
    emotions: Sequence[str | None] = EMOTION_CHOICES,
    clip_embeddings: Sequence[np.ndarray] = (),
    clip_share: float = 0.0,
    log: Callable[[str], None] = print,
) -> list[Pair]:
    """The teacher's (hidden, durations, mel) for every chunk of every text, made on `device` in fp32, kept on
    the CPU; each request's emotion drawn from `emotions` (repeat a label to weight it); a share `clip_share` of
    the requests speaks with one of `clip_embeddings` (GE2E embeddings of reference clips: `embed_clips`), as a
    clone does."""
    from rtvox.runtime.steps import ChunkJob, encode_inputs, encode_row
    from rtvox.runtime.synthesizer import Synthesizer
    from rtvox.runtime.types import SynthesisRequest

    synth = Synthesizer(teacher_dir, device=device, backend="eager")
    if not isinstance(synth.bundle, ModelBundle):
        raise InputError(f"{teacher_dir} is not a default-family (FastSpeech) model; only its decoder distils")
    model = synth.bundle.acoustic
    names = list(synth.voices.builtin_names)
    cloned = [np.asarray(e, dtype=np.float32) for e in clip_embeddings]
    rng = random.Random(seed)
    pairs: list[Pair] = []
    started = time.monotonic()
    for n, text in enumerate(texts):
        pick = request_settings(rng, names, emotions, clips=len(cloned), clip_share=clip_share)
        embedding: np.ndarray | None = None  # a clip's or a blend's; None speaks the built-in voice by name
        if pick.clip is not None:
            embedding = cloned[pick.clip]
        elif pick.blend is not None:
            a, b, w = pick.blend
            mix = w * synth.voices.get(a).embedding + (1 - w) * synth.voices.get(b).embedding
            embedding = (mix / np.linalg.norm(mix)).astype(np.float32)
        request = SynthesisRequest(
            text,
            voice=None if embedding is not None else pick.voice,
            speaker_embedding=embedding,
            emotion=pick.emotion,
            speed=pick.speed,
        )
        try:
            prepared = synth.prepare(request)
        except InputError as e:  # a text the frontend cannot speak: skipped, said
            log(f"skip text {n}: {e}")
            continue
        rows = [encode_row(ChunkJob(prepared, i)) for i in range(len(prepared.chunks))]
        with torch.inference_mode():
            hidden, durations = model.encode(*encode_inputs(rows, synth.device))
            mel = model.decode(hidden, durations)
            hidden, durations, mel = hidden.cpu(), durations.cpu(), mel.cpu()
        for row, ids in enumerate(r[0] for r in rows):
            frames = int(durations[row].sum())
            pairs.append(
                Pair(hidden[row, : len(ids)].clone(), durations[row, : len(ids)].clone(), mel[row, :, :frames].clone())
            )
        if (n + 1) % 200 == 0:
            log(f"pairs: {n + 1}/{len(texts)} texts, {len(pairs)} chunks, {time.monotonic() - started:.0f} s")
    return pairs


def embed_clips(model_dir: Path, clips: Sequence[Path]) -> np.ndarray:
    """[len(clips), D] GE2E embeddings of reference clips, as the model's runtime embeds a clone's clip (a bad or
    missing clip raises an InputError naming it)."""
    from rtvox.runtime.synthesizer import Synthesizer

    synth = Synthesizer(model_dir, device="cpu", backend="eager")
    return np.stack([synth.embed_speaker(path, param="clips") for path in clips]).astype(np.float32)


def batches(pairs: Sequence[Pair], batch_frames: int, rng: random.Random) -> list[list[int]]:
    """Length-sorted index batches of at most `batch_frames` padded frames (at least one pair each), shuffled."""
    order = sorted(range(len(pairs)), key=lambda i: pairs[i].frames)
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = max([pairs[j].frames for j in current] + [pairs[i].frames])
        if current and longest * (len(current) + 1) > batch_frames:
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    rng.shuffle(out)
    return out


def collate(pairs: Sequence[Pair], device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """-> hidden [B, N, D], durations Long[B, N], teacher mel [B, n_mels, T], frame mask Bool[B, T]."""
    n = max(p.hidden.shape[0] for p in pairs)
    t = max(p.frames for p in pairs)
    hidden = torch.zeros(len(pairs), n, pairs[0].hidden.shape[1])
    durations = torch.zeros(len(pairs), n, dtype=torch.long)
    mel = torch.zeros(len(pairs), pairs[0].mel.shape[0], t)
    mask = torch.zeros(len(pairs), t, dtype=torch.bool)
    for i, p in enumerate(pairs):
        hidden[i, : p.hidden.shape[0]] = p.hidden
        durations[i, : p.durations.shape[0]] = p.durations
        mel[i, :, : p.frames] = p.mel
        mask[i, : p.frames] = True
    return hidden.to(device), durations.to(device), mel.to(device), mask.to(device)


def masked_l1(student: AcousticModel, pairs: Sequence[Pair]) -> Tensor:
    """Mean absolute error of the student's mel against the teacher's over the pairs' real frames."""
    return distill_loss(student, pairs, None)


@dataclass(frozen=True)
class FeatureTarget:
    """Block-level supervision: the teacher (frozen, on the student's device) whose decoder block
    `blocks[j]` student block j is pulled toward, with `weight` on the summed relative squared errors."""

    teacher: AcousticModel
    blocks: tuple[int, ...]
    weight: float


def distill_loss(student: AcousticModel, pairs: Sequence[Pair], features: FeatureTarget | None) -> Tensor:
    """Masked mel L1 against the teacher's mel, plus (with `features`) for each student block the squared error
    of its output against its teacher block's, relative to that block's mean square (so every block counts alike
    whatever the scale of its residual stream)."""
    hidden, durations, target, mask = collate(pairs, next(student.parameters()).device)
    blocks = features is not None and features.weight != 0
    mine: list[Tensor] = []
    out = student.decode_masked(hidden, durations, mask, states=mine if blocks else None)
    keep = mask[:, None, :].expand_as(out)
    loss = (out - target).abs()[keep].mean()
    if features is None or not blocks:
        return loss
    theirs: list[Tensor] = []
    with torch.no_grad():
        features.teacher.decode_masked(hidden, durations, mask, states=theirs)
    frames = mask[..., None].to(out.dtype)
    for state, index in zip(mine, features.blocks, strict=True):
        goal = theirs[index]
        error = ((state - goal) ** 2 * frames).sum() / (goal**2 * frames).sum().clamp_min(1e-8)
        loss = loss + features.weight * error
    return loss


def evaluate(student: AcousticModel, pairs: Sequence[Pair], batch_frames: int) -> float:
    """Mean absolute mel error over every frame of `pairs` (eval mode, no grad)."""
    was = student.training
    student.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for idx in batches(pairs, batch_frames, random.Random(0)):
            frames = sum(pairs[i].frames for i in idx)
            total += float(masked_l1(student, [pairs[i] for i in idx])) * frames
            count += frames
    student.train(was)
    return total / max(count, 1)


def train_student(
    student: AcousticModel,
    train: Sequence[Pair],
    valid: Sequence[Pair],
    *,
    steps: int,
    batch_frames: int,
    lr: float,
    run_dir: Path,
    seed: int,
    save_every: int = 200,
    minutes: float | None = None,
    features: FeatureTarget | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Train the student's decoder side on `train` (resuming from run_dir/state.pt); returns the last figures.

    Dropout stays off: the target is the teacher's deterministic output, and training with the model's dropout
    moved even a student identical to its teacher away from it (mel L1 0.053 → 0.080 for the teacher without its
    postnet); `features` adds block-level targets."""
    for name, p in student.named_parameters():
        p.requires_grad_(name.startswith(DECODER_PREFIXES))
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    state_path = run_dir / "state.pt"
    step = 0
    if state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        student.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = int(state["step"])
        log(f"resumed at step {step}")

    def save_state() -> None:
        torch.save({"model": student.state_dict(), "opt": opt.state_dict(), "step": step}, state_path)

    student.eval()  # dropout off (see above); gradients flow as in train mode, the model has no batch norm
    rng = random.Random(f"{seed}:{step}")
    plan: list[list[int]] = []
    started = time.monotonic()
    figures = {"step": float(step)}
    log_path = run_dir / "log.jsonl"
    while step < steps:
        if minutes is not None and time.monotonic() - started > minutes * 60:
            log(f"stopping at step {step}: the {minutes:g}-minute budget is spent")
            break
        if not plan:
            plan = batches(train, batch_frames, rng)
        idx = plan.pop()
        for group in opt.param_groups:  # cosine from lr to lr/20 over `steps`, after a warm-up (≤ 50 steps)
            warm = min(1.0, (step + 1) / min(50, steps // 10 + 1))
            group["lr"] = lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        loss = distill_loss(student, [train[i] for i in idx], features)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            log(f"step {step} loss {float(loss.detach()):.4f} ({time.monotonic() - started:.0f} s)")
        if step % save_every == 0 or step == steps:
            figures = {
                "step": float(step),
                "train_loss": float(loss.detach()),
                "valid_l1": evaluate(student, valid, batch_frames),
            }
            log(f"step {step} valid L1 {figures['valid_l1']:.4f}")
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(figures) + "\n")
            save_state()
    if figures.get("step") != float(step):
        figures = {"step": float(step), "valid_l1": evaluate(student, valid, batch_frames)}
        save_state()
    return figures


def check_out_dir(teacher_dir: Path, out_dir: Path) -> None:
    """InputError when the student would replace its own teacher."""
    if out_dir.resolve() == teacher_dir.resolve():
        raise InputError("the output directory must not be the teacher's", param="out")


def write_student(teacher_dir: Path, out_dir: Path, student: AcousticModel, version: str) -> Path:
    """OUT_DIR = the teacher's directory with the student's acoustic weights and config (and `version`)."""
    check_out_dir(teacher_dir, out_dir)
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(teacher_dir, staging)
    save_weights(staging, "acoustic", student.state_dict())
    update_config(staging, lambda c: dataclasses.replace(c, acoustic=student.config, version=version))
    if out_dir.exists():  # replaced whole: never a half-written model directory under its name
        shutil.rmtree(out_dir)
    staging.rename(out_dir)
    return out_dir


def distill_decoder(
    teacher_dir: Path,
    texts_file: Path,
    out_dir: Path,
    run_dir: Path,
    shape: StudentShape,
    *,
    steps: int,
    batch_frames: int = 4000,
    lr: float = 3e-4,
    seed: int = 0,
    version: str | None = None,
    minutes: float | None = None,
    device: str = "cpu",
    feature_weight: float = 1.0,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """The whole recipe: pairs (cached in run_dir/pairs.pt), init, training, the student model directory.
    `device`: where the pairs are made and the student trains ("cuda" for a GPU); the pairs stay on the CPU.
    `feature_weight`: weight of the block-level targets (each student block against the teacher block it was
    initialized from); 0 = the mel alone."""
    if not texts_file.is_file():
        raise InputError(f"texts file {texts_file} does not exist; give a file with one text per line", param="texts")
    texts = [line.strip() for line in texts_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(texts) < 20:
        raise InputError(f"{texts_file} has {len(texts)} texts; give at least 20, one per line", param="texts")
    check_out_dir(teacher_dir, out_dir)  # before the training, not after it
    run_dir.mkdir(parents=True, exist_ok=True)
    teacher = ModelBundle.load(teacher_dir).acoustic
    shape.check(teacher.config)
    cache = run_dir / "pairs.pt"
    if cache.is_file():
        raw = torch.load(cache, map_location="cpu", weights_only=True)
        pairs = [Pair(h, d, m) for h, d, m in raw]
        log(f"{len(pairs)} pairs from {cache}")
    else:
        pairs = make_pairs(teacher_dir, texts, seed=seed, device=device, log=log)
        torch.save([(p.hidden, p.durations, p.mel) for p in pairs], cache)
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    n_valid = max(1, len(pairs) // 20)
    valid = [pairs[i] for i in order[:n_valid]]
    train = [pairs[i] for i in order[n_valid:]]
    teacher = teacher.to(device).eval()
    student = student_from_teacher(teacher, shape).to(device)
    log(f"init valid L1 {evaluate(student, valid, batch_frames):.4f} ({len(train)} train / {len(valid)} valid chunks)")
    if not (run_dir / "state.pt").is_file() and fit_kernels(teacher, student, shape, train[:FIT_PAIRS], batch_frames):
        log(f"kernels refitted: valid L1 {evaluate(student, valid, batch_frames):.4f}")
    figures = train_student(
        student,
        train,
        valid,
        steps=steps,
        batch_frames=batch_frames,
        lr=lr,
        run_dir=run_dir,
        seed=seed,
        minutes=minutes,
        features=FeatureTarget(teacher, shape.keep_blocks, feature_weight) if feature_weight else None,
        log=log,
    )
    student.eval()
    teacher_config = json.loads((teacher_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    write_student(teacher_dir, out_dir, student, version or str(teacher_config["version"]))
    log(f"wrote {out_dir} (valid L1 {figures['valid_l1']:.4f} at step {int(figures['step'])})")
    return figures
