"""The bodies of `rtvox export`, `rtvox build` and `rtvox bench` (cli.py only parses arguments)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rtvox.cli_errors import check_output_folder
from rtvox.engines.base import BuildOptions, available_backends, resolve_device
from rtvox.engines.build import build_engines, describe_engines, export_artifacts, parse_dtype
from rtvox.engines.shapes import ShapeProfile
from rtvox.errors import InputError
from rtvox.models.bundle import ModelBundle, resolve_model


def _modules(modules: str) -> list[str]:
    names = [m.strip() for m in modules.split(",") if m.strip()]
    if not names:
        raise InputError(
            "--modules names no module; give some of them, comma-separated, or leave it out", param="modules"
        )
    return names


def export_command(
    model: str | None, out: Path, backend: str, dtype: str, device: str, profile: str, modules: str
) -> dict[str, Path]:
    dev = resolve_device(device)
    names = _modules(modules)
    options = BuildOptions(profile=ShapeProfile.preset(profile))
    parse_dtype(dtype)
    check_output_folder(out)  # after every flag is known good: a bad one leaves no empty folder behind
    bundle = ModelBundle.load(resolve_model(model), device=dev)
    return export_artifacts(bundle, backend, out, dev, dtype, names, options)


def build_command(
    model: str | None, backend: str, dtype: str, device: str, profile: str, modules: str, rebuild: bool
) -> dict[str, Any]:
    dev = resolve_device(device)
    names = _modules(modules)
    bundle = ModelBundle.load(resolve_model(model), device=dev)
    options = BuildOptions(profile=ShapeProfile.preset(profile), rebuild=rebuild)
    engines = build_engines(bundle, backend, dev, dtype, names, options, fallback=backend == "auto")
    return describe_engines(engines)


def parse_variants(variants: str) -> list[tuple[str, str]]:
    """`--variants` ("auto,onnx,inductor:bf16") as (backend, dtype) pairs; a name that is no backend or dtype is
    an InputError here, before the model loads and the baseline runs (a failed *build* is a row of the report)."""
    known = ("auto", *available_backends())
    pairs = []
    for item in variants.split(","):
        backend, _, named = item.strip().partition(":")
        dtype = named or "float32"
        if backend not in known:
            raise InputError(f"unknown backend {backend!r} in --variants; use {', '.join(known)}", param="variants")
        parse_dtype(dtype)
        pairs.append((backend, dtype))
    return pairs


def bench_command(
    model: str | None,
    out: Path,
    variants: str,
    device: str,
    repeats: int,
    batches: str,
    profile: str,
    piper: bool,
    load: bool,
) -> str:
    from rtvox.engines.bench_run import run_bench

    pairs = parse_variants(variants)
    check_output_folder(out)
    report = run_bench(
        resolve_model(model),
        pairs,
        out,
        device=str(resolve_device(device)),
        repeats=repeats,
        batches=parse_batches(batches),
        profile=profile,
        piper=piper,
        load=load,
    )
    summary = {"out": str(out), "speedups": report["speedups"]}
    return (out / "bench.md").read_text() + "\n" + json.dumps(summary, indent=1)


def parse_batches(text: str) -> tuple[int, ...]:
    """`--batches 1,8,32` → (1, 8, 32); anything else is the caller's error."""
    try:
        sizes = tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise InputError(
            f"--batches {text!r}: give comma-separated whole numbers, e.g. 1,8,32", param="batches"
        ) from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"--batches {text!r}: every batch size must be at least 1", param="batches")
    return sizes
