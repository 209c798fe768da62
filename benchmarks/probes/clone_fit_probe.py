"""Probe: does fitting a clone's speaker vector to its reference's spectrum (by gradient, through the acoustic
model) move the cloning scores? CPU only.

    .venv/bin/python benchmarks/probes/clone_fit_probe.py --corpus /work/corpus-v3b --clone-refs /work/eval-voices \
        --steps 0 --steps 20 --steps 40 --out benchmarks/results/quality/v87/clone_fit_probe.json

The cloning test of `rtvox eval --clone` (same references, 3 en + 3 zh dev sentences, GE2E cosine to the
reference clip's own embedding e, closer-than-any-built-in), with one change: the model is conditioned on a
speaker vector fitted to the reference instead of e. Fitting starts at e and runs Adam on a free 256-d vector
(unit-normalized before use) so that the model's mel of four calibration sentences (not eval sentences) matches
the reference's speech log-mel statistics: per band mean and standard deviation over speech frames. The GE2E
judge is never in the loss. Measurement only.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from clone_timbre_probe import CALIBRATION, add_cloning_args, cloning_setup, report, score_variant

from rtvox.audio.loudness import trim_silence
from rtvox.constants import SAMPLE_RATE
from rtvox.models.emotion import fuse_condition
from rtvox.runtime.steps import encode_inputs
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest


def speech_stats(mel: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean [80], std [80]) of mel [80, T] over the frames `keep` [T]."""
    frames = mel[:, keep]
    return frames.mean(1), frames.std(1)


def loud_frames(mel: torch.Tensor) -> torch.Tensor:
    level = mel.detach().mean(0)
    return level > torch.quantile(level, 0.3)


def fit(
    synth: Synthesizer,
    ref_audio: np.ndarray,
    init: np.ndarray,
    steps: int,
    lr: float,
    w_std: float,
    basis: np.ndarray | None = None,
    log: list[float] | None = None,
) -> np.ndarray:
    speech = np.ascontiguousarray(trim_silence(ref_audio, SAMPLE_RATE), dtype=np.float32)
    with torch.inference_mode():
        ref_mel = synth._mel(torch.from_numpy(speech)[None])[0]
    ref_mean, ref_std = speech_stats(ref_mel, loud_frames(ref_mel))
    ref_mean, ref_std = ref_mean.clone(), ref_std.clone()
    acoustic = synth.bundle.acoustic.eval()
    for p in acoustic.parameters():
        p.requires_grad_(False)
    with torch.inference_mode():
        emotion = synth.bundle.emotion_table(torch.tensor([0])).clone()  # neutral row
    request = SynthesisRequest(text="x")
    ids = []
    for text in CALIBRATION:
        prepared = synth.prepare(SynthesisRequest(text=text, speaker_embedding=init))
        ids += [c.ids for c in prepared.chunks]
    start = torch.tensor(init, dtype=torch.float32)
    if basis is None:
        param = start.clone().requires_grad_(True)
    else:  # e + sum_i w_i (b_i - e): moves only within the span of known voices around e
        directions = torch.tensor(basis, dtype=torch.float32) - start
        param = torch.zeros(directions.shape[0], requires_grad=True)
    opt = torch.optim.Adam([param], lr=lr)

    def current() -> torch.Tensor:
        vec = param if basis is None else start + param @ directions
        return vec / vec.norm()

    for _ in range(steps):
        speaker = current()
        cond = fuse_condition(speaker[None], emotion, torch.ones(1))
        rows = [(i, cond, request, 0, (0.0, 1.0, 0.0, 1.0), 1.0) for i in ids]
        inputs = list(encode_inputs(rows, torch.device("cpu")))
        hidden, durations = acoustic.encode(*inputs)
        mel = acoustic.decode(hidden, durations)
        lengths = durations.sum(1).tolist()
        per = [mel[r, :, : int(n)] for r, n in enumerate(lengths)]
        joined = torch.cat(per, dim=1)
        mean, std = speech_stats(joined, loud_frames(joined))
        loss = (mean - ref_mean).pow(2).mean() + w_std * (std - ref_std).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None:
            log.append(float(loss.detach()))
    return current().detach().numpy().astype(np.float32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cloning_args(p)
    p.add_argument("--steps", type=int, action="append")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--w-std", type=float, default=1.0)
    p.add_argument("--basis", action="store_true", help="move only within the span of the built-in voices around e")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.set_num_threads(2)
    synth = Synthesizer(args.model, device="cpu")
    refs, sentences, table = cloning_setup(synth, args.corpus, args.clone_refs)
    budgets = sorted(args.steps or [0, 30])
    scores: dict[int, dict[str, list[float]]] = {s: {"cosine": [], "closer": []} for s in budgets}
    per_ref = []
    for ref in refs:
        emb = synth.embed_speaker(ref.wav_bytes())
        row: dict[str, object] = {"reference": ref.name}
        for n in budgets:
            t0 = time.perf_counter()
            basis = table if args.basis else None
            vec = fit(synth, ref.audio, emb, n, args.lr, args.w_std, basis=basis) if n else emb
            row[f"fit_s_{n}"] = round(time.perf_counter() - t0, 1)
            row[f"cos_init_{n}"] = round(float(vec @ emb), 4)
            row[f"steps_{n}"] = score_variant(synth, sentences, vec, emb, table, scores[n])
        per_ref.append(row)
        print(row, flush=True)
    report(args.out, {"model": args.model, "lr": args.lr, "w_std": args.w_std, "basis": args.basis}, scores, per_ref)


if __name__ == "__main__":
    main()
