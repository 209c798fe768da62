"""`rtvox train vocoder`: the iSTFT vocoder (or HiFi-GAN) on random audio segments, with GAN losses.

Generator loss = 45 · L1(log-mel) + multi-resolution STFT loss + (after `gan_start`) least-squares adversarial
loss + 2 · feature matching, against a multi-period discriminator (waveform folded by periods 2, 3, 5, 7, 11)
and a multi-resolution spectrogram discriminator (three STFT sizes). The discriminators live here only:
inference never needs them.

With `gta_fraction` > 0 that share of every batch comes from ground-truth-aligned pairs (training/gta.py: the
acoustic model's teacher-forced mel in, the recording as the target): the generator learns to render the mels it
gets at run time. The rest of the batch is copy synthesis as before (the GTA recordings join the audio pool).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rtvox.audio.mel import MelSpectrogram
from rtvox.constants import HOP_LENGTH
from rtvox.errors import InputError
from rtvox.models.vocoder import build_vocoder, vocoder_preset
from rtvox.training.checkpoint import load_snapshot, load_state, log_step, save_snapshot, save_state
from rtvox.training.data import load_vocoder_audio, random_segments
from rtvox.training.gta import load_gta, random_gta_segments

STFT_RESOLUTIONS = ((512, 128), (1024, 256), (2048, 512))


def _run_stack(convs: nn.ModuleList, post: nn.Module, x: Tensor) -> tuple[Tensor, list[Tensor]]:
    """A discriminator's conv stack: (flattened scores, every layer's activations for feature matching)."""
    feats = []
    for conv in convs:
        x = F.leaky_relu(conv(x), 0.1)
        feats.append(x)
    x = post(x)
    feats.append(x)
    return x.flatten(1), feats


class PeriodDiscriminator(nn.Module):
    def __init__(self, period: int, channels: tuple[int, ...] = (32, 64, 128, 256)) -> None:
        super().__init__()
        self.period = period
        sizes = (1, *channels)
        self.convs = nn.ModuleList(
            [nn.Conv2d(a, b, (5, 1), (3, 1), padding=(2, 0)) for a, b in itertools.pairwise(sizes)]
        )
        self.post = nn.Conv2d(channels[-1], 1, (3, 1), padding=(1, 0))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        b, t = wav.shape
        pad = (-t) % self.period
        x = F.pad(wav, (0, pad), mode="reflect").view(b, 1, -1, self.period)
        return _run_stack(self.convs, self.post, x)


class SpectrogramDiscriminator(nn.Module):
    window: Tensor

    def __init__(self, n_fft: int, hop: int, channels: int = 32) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        self.convs = nn.ModuleList(
            [
                nn.Conv2d(1, channels, (3, 9), padding=(1, 4)),
                nn.Conv2d(channels, channels, (3, 9), (1, 2), padding=(1, 4)),
                nn.Conv2d(channels, channels, (3, 9), (1, 2), padding=(1, 4)),
                nn.Conv2d(channels, channels, (3, 3), padding=(1, 1)),
            ]
        )
        self.post = nn.Conv2d(channels, 1, (3, 3), padding=(1, 1))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        spec = torch.stft(wav.float(), self.n_fft, self.hop, window=self.window, return_complex=True).abs()
        x = spec.clamp_min(1e-5).log().transpose(1, 2)[:, None]  # [B, 1, frames, bins]
        return _run_stack(self.convs, self.post, x)


class Discriminators(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.members = nn.ModuleList(
            [PeriodDiscriminator(p) for p in (2, 3, 5, 7, 11)]
            + [SpectrogramDiscriminator(n, h) for n, h in STFT_RESOLUTIONS]
        )

    def forward(self, wav: Tensor) -> list[tuple[Tensor, list[Tensor]]]:
        return [d(wav) for d in self.members]


def stft_loss(fake: Tensor, real: Tensor) -> Tensor:
    """Spectral convergence + log-magnitude L1 over STFT_RESOLUTIONS."""
    total = torch.zeros((), device=fake.device)
    for n_fft, hop in STFT_RESOLUTIONS:
        window = torch.hann_window(n_fft, device=fake.device)
        f = torch.stft(fake.float(), n_fft, hop, window=window, return_complex=True).abs().clamp_min(1e-5)
        r = torch.stft(real.float(), n_fft, hop, window=window, return_complex=True).abs().clamp_min(1e-5)
        total = total + torch.linalg.norm(r - f) / torch.linalg.norm(r) + (r.log() - f.log()).abs().mean()
    return total / len(STFT_RESOLUTIONS)


@dataclass
class VocoderRun:
    data: Path
    run_dir: Path
    preset: str = "vocos-small"
    init: Path | None = None
    snapshot: Path | None = None
    minutes: float = 8.0
    max_steps: int = 1_000_000
    batch: int = 32
    segment_frames: int = 32
    lr: float = 5e-4
    gan_start: int = 0  # step at which the adversarial losses start; -1 = never
    gta_fraction: float = 0.0  # share of each batch from the GTA pairs (gta-*.npz beside the shards)
    seed: int = 0
    device: str = "cuda"
    log_every: int = 100
    save_every_min: float = 2.0


def train_vocoder(run: VocoderRun) -> dict[str, Any]:
    t0 = time.monotonic()
    torch.manual_seed(run.seed)
    rng = np.random.default_rng(run.seed)
    device = torch.device(run.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if not 0.0 <= run.gta_fraction <= 1.0:
        raise InputError(f"gta_fraction must be within 0..1, got {run.gta_fraction}")
    gta = load_gta(run.data)  # their recordings join the audio pool whatever the fraction
    if run.gta_fraction > 0 and not gta:
        raise InputError(f"--gta-fraction {run.gta_fraction} but no gta-*.npz in {run.data} (recipes/train/gta.py)")
    has_shards = any(run.data.glob("vocoder-*.npz"))
    clips = (load_vocoder_audio(run.data) if has_shards or not gta else []) + [c.wav for c in gta]
    n_gta = round(run.batch * run.gta_fraction)
    config = vocoder_preset(run.preset)
    gen = build_vocoder(config)
    disc = Discriminators()
    modules: dict[str, nn.Module] = {"vocoder": gen, "discriminator": disc}
    progress: dict[str, Any] = {"step": 0, "seconds": 0.0, "preset": run.preset}
    if run.init is not None:
        progress.update(load_snapshot(run.init, modules, optional=frozenset({"discriminator"})))
    gen.to(device).train()
    disc.to(device).train()
    mel_fn = MelSpectrogram().to(device)
    opt_g = torch.optim.AdamW(gen.parameters(), lr=run.lr, betas=(0.8, 0.9))
    opt_d = torch.optim.AdamW(disc.parameters(), lr=run.lr, betas=(0.8, 0.9))
    resumed = load_state(run.run_dir, modules, {"g": opt_g, "d": opt_d})
    if resumed is not None:
        progress = resumed
    run.run_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"vocoder {run.preset}: {len(clips)} clips, {sum(map(len, clips)) / 24000 / 60:.1f} min"
        f" ({len(gta)} GTA pairs, {n_gta} of {run.batch} rows a batch)",
        flush=True,
    )
    step, seconds0, last_save = int(progress["step"]), float(progress.get("seconds", 0.0)), time.monotonic()
    length = run.segment_frames * HOP_LENGTH
    while True:
        wav_np = random_segments(clips, run.batch - n_gta, length, rng)
        if n_gta:
            gta_mel, gta_wav = random_gta_segments(gta, n_gta, run.segment_frames, rng)
            wav_np = np.concatenate([wav_np, gta_wav])
        wav = torch.from_numpy(wav_np).to(device)
        mel = mel_fn(wav)  # [B, 80, frames]: the target, and the input of the copy-synthesis rows
        heard = mel
        if n_gta:
            heard = torch.cat([mel[: run.batch - n_gta], torch.from_numpy(gta_mel).to(device)])
        fake = gen(heard)
        mel_loss = F.l1_loss(mel_fn(fake), mel)
        losses = {"mel": mel_loss, "stft": stft_loss(fake, wav)}
        use_gan = 0 <= run.gan_start <= step
        if use_gan:
            d_loss = torch.zeros((), device=device)
            for (real_out, _), (fake_out, _) in zip(disc(wav), disc(fake.detach()), strict=True):
                d_loss = d_loss + (1 - real_out).square().mean() + fake_out.square().mean()
            opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            opt_d.step()
            losses["disc"] = d_loss
            adv = torch.zeros((), device=device)
            fm = torch.zeros((), device=device)
            with torch.no_grad():
                real_feats = [f for _, feats in disc(wav) for f in feats]
            fake_results = disc(fake)
            for out, _ in fake_results:
                adv = adv + (1 - out).square().mean()
            fake_feats = [f for _, feats in fake_results for f in feats]
            for r, f in zip(real_feats, fake_feats, strict=True):
                fm = fm + (r - f).abs().mean()
            losses["adv"], losses["fm"] = adv, fm
            g_loss = 45 * mel_loss + losses["stft"] + adv + 2 * fm
        else:
            g_loss = 45 * mel_loss + 2 * losses["stft"]
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        torch.nn.utils.clip_grad_norm_(gen.parameters(), 100.0)
        opt_g.step()
        step += 1
        elapsed = time.monotonic() - t0
        if step % run.log_every == 0:
            log_step(run.run_dir, losses, {"step": step, "t": round(elapsed, 1)})
        progress = {"step": step, "seconds": seconds0 + elapsed, "preset": run.preset}
        if time.monotonic() - last_save > run.save_every_min * 60:
            save_state(run.run_dir, modules, {"g": opt_g, "d": opt_d}, progress)
            last_save = time.monotonic()
        if elapsed > run.minutes * 60 or step >= run.max_steps:
            break
    save_state(run.run_dir, modules, {"g": opt_g, "d": opt_d}, progress)
    save_snapshot(run.snapshot or run.run_dir / "snapshot", modules, progress)
    print(json.dumps({"final": progress}), flush=True)
    return progress
