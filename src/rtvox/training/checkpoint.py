"""Resumable training state and portable weight snapshots.

Two kinds of file, because the GPU machine is bare on every start and returns at most 16 MiB per file:
- `state.pt` in the run directory: everything to resume in place (modules, optimizers, step, RNG), written
  atomically every few minutes, so a killed run loses minutes, not the run.
- weight snapshots: each module's weights as fp16 safetensors shards (< 16 MiB each) plus `progress.json`
  (step, seconds trained, last losses). A later run starts from a snapshot with `--init` (fresh optimizer
  moments, same step count); `rtvox train export` builds a model directory from snapshots.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rtvox.errors import ModelError
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.bundle import load_weights, save_weights

STATE_NAME = "state.pt"
PROGRESS_NAME = "progress.json"


def log_step(run_dir: Path, losses: dict[str, Any], extra: dict[str, Any]) -> None:
    """One line of training log: the losses (rounded) then `extra` (step, lr, ...), appended to
    run_dir/log.jsonl and printed."""
    record = {k: round(float(v.detach() if isinstance(v, torch.Tensor) else v), 4) for k, v in losses.items()}
    line = json.dumps(record | extra)
    with (run_dir / "log.jsonl").open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    print(line, flush=True)


def optimizer_step(
    opt: torch.optim.Optimizer,
    params: Sequence[torch.Tensor],
    lr: float,
    device: torch.device,
    compute: Callable[[], dict[str, torch.Tensor]],
) -> tuple[dict[str, torch.Tensor], float]:
    """One update of the acoustic and AR trainers: set the lr, losses under bf16 autocast on CUDA, backward on
    losses["total"], clip the gradient norm at 1, step. Returns the losses and the norm before clipping."""
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        losses = compute()
    opt.zero_grad(set_to_none=True)
    losses["total"].backward()
    grad = torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return losses, float(grad)


def save_state(run_dir: Path, modules: dict[str, nn.Module], optimizers: dict[str, Any], extra: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "modules": {k: m.state_dict() for k, m in modules.items()},
        "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
        "extra": extra,
        "rng": torch.get_rng_state(),
    }
    tmp = run_dir / f".{STATE_NAME}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, run_dir / STATE_NAME)


def load_state(run_dir: Path, modules: dict[str, nn.Module], optimizers: dict[str, Any]) -> dict[str, Any] | None:
    """Restore in place from run_dir/state.pt; returns its `extra` dict, or None when there is none."""
    path = run_dir / STATE_NAME
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    for key, module in modules.items():
        module.load_state_dict(state["modules"][key])
    for key, opt in optimizers.items():
        if key in state["optimizers"]:
            opt.load_state_dict(state["optimizers"][key])
    torch.set_rng_state(state["rng"])
    extra: dict[str, Any] = state["extra"]
    return extra


def save_snapshot(directory: Path, modules: dict[str, nn.Module], progress: dict[str, Any]) -> list[Path]:
    """fp16 safetensors per module (sharded under 16 MiB) + progress.json."""
    directory.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for name, module in modules.items():
        state = getattr(module, "inference_state_dict", module.state_dict)()
        files += save_weights(directory, name, {k: v.detach().float().cpu() for k, v in state.items()})
    atomic_write_bytes(directory / PROGRESS_NAME, json.dumps(progress, indent=1).encode("utf-8"))
    return files


def load_module_state(
    module: nn.Module, state: dict[str, torch.Tensor], name: str, new_layers: frozenset[str], where: str
) -> None:
    """`state` into `module` (registered as `name`): every tensor must fit, and only parameters under one of
    `new_layers` ("module.name" prefixes: layers the run adds) may be missing."""
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # tensors of other shapes: another preset or vocabulary
        mismatch = str(exc).split("\n\t")[1:4]
        raise ModelError(f"{where} does not fit {name} (another size?): {'; '.join(mismatch)}") from None
    missing = [k for k in missing if not any(f"{name}.{k}".startswith(p) for p in new_layers)]
    if missing or unexpected:
        raise ModelError(f"{where} does not fit {name}: missing {missing}, unexpected {unexpected}")


def load_snapshot(
    directory: Path,
    modules: dict[str, nn.Module],
    optional: frozenset[str] = frozenset(),
    new_layers: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Load the snapshot's weights (fp16 -> fp32) into `modules` (strict); returns progress.json. Modules named in
    `optional` keep their fresh weights when the snapshot has no file for them (a vocoder snapshot shipped without
    its discriminator). Parameters whose "module.name" starts with one of `new_layers` may be missing from the
    snapshot (a layer the run adds) and keep their fresh values; anything else missing or unexpected raises."""
    for name, module in modules.items():
        single, shards = directory / f"{name}.safetensors", directory.glob(f"{name}-*-of-*.safetensors")
        if name in optional and not single.is_file() and not any(shards):
            continue
        state = load_weights(directory, name, torch.device("cpu"), torch.float32)
        load_module_state(module, state, name, new_layers, f"snapshot {directory}")
    path = directory / PROGRESS_NAME
    progress: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return progress
