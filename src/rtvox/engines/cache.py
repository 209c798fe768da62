"""The on-disk engine cache: one folder per (model hash, module, backend, dtype, device, shape profile,
torch / runtime versions).

Compiled artifacts are not portable: an AOTInductor package built by torch 2.13 does not load in 2.11, an
ONNX Runtime-TensorRT engine is tied to the GPU and TensorRT version. Every one of those goes into the key,
so a changed environment builds afresh instead of loading something that crashes.

    $RTVOX_ENGINE_CACHE (default ~/.cache/rtvox/engines)/<module>-<backend>-<dtype>-<key16>/
        meta.json      the full key, readable
        <artifacts>    model.onnx, model.pt2, model.engine, ...
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rtvox.engines.shapes import ShapeProfile
from rtvox.fsutil import atomic_write_bytes

CACHE_ENV = "RTVOX_ENGINE_CACHE"
_RUNTIMES = ("onnxruntime", "onnxruntime-gpu", "tensorrt", "onnx", "onnxscript", "triton")


def default_cache_dir() -> Path:
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    return Path.home() / ".cache" / "rtvox" / "engines"


# Bump when a module's forward changes what it computes, so engines exported from the old graph are not reused
# (2, 2026-12-03: the variance adaptor no longer clamps predicted energy at 0; 3: acoustic_encode takes the
# emotion prosody prior's `prosody` row, an eighth input).
GRAPH_VERSION = 3


def runtime_versions() -> dict[str, str]:
    """Versions of torch, of rtvox's module graphs and of every optional runtime present: all enter the cache
    key."""
    versions = {"torch": torch.__version__, "python": platform.python_version(), "graphs": str(GRAPH_VERSION)}
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    for name in _RUNTIMES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def device_id(device: torch.device) -> str:
    """The device as far as compiled code cares: CPU architecture, or GPU name and compute capability."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return f"cuda:{torch.cuda.get_device_name(index)}:sm{major}{minor}"
    return f"cpu:{platform.machine()}"


def state_hash(net: nn.Module) -> str:
    """sha256 of a module's tensors, for engines built from a module with no model directory behind it."""
    digest = hashlib.sha256()
    for name, tensor in sorted(net.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheKey:
    """Everything a compiled artifact depends on."""

    model_hash: str
    module: str
    backend: str
    dtype: str
    device: str
    profile: str  # ShapeProfile.key()
    versions: str  # json of runtime_versions()
    options: str = ""  # backend options that change the artifact (mode, quantization method, ...)

    @classmethod
    def make(
        cls,
        model_hash: str,
        module: str,
        backend: str,
        dtype: torch.dtype,
        device: torch.device,
        profile: ShapeProfile,
        options: dict[str, Any] | None = None,
    ) -> CacheKey:
        return cls(
            model_hash,
            module,
            backend,
            str(dtype).removeprefix("torch."),
            device_id(device),
            profile.key(),
            json.dumps(runtime_versions(), sort_keys=True),
            json.dumps(options or {}, sort_keys=True),
        )

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True).encode()).hexdigest()

    def folder(self, root: Path | None = None) -> Path:
        """The cache folder of this key (created, with meta.json)."""
        path = (root or default_cache_dir()) / f"{self.module}-{self.backend}-{self.dtype}-{self.digest()[:16]}"
        path.mkdir(parents=True, exist_ok=True)
        meta = path / "meta.json"
        if not meta.is_file():
            atomic_write_bytes(meta, (json.dumps(self.__dict__, indent=1) + "\n").encode())
        return path
