"""Capturing a function as a CUDA graph: the one recipe every graphed path here uses."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")

_STREAMS: dict[int, torch.cuda.Stream] = {}
_STREAMS_LOCK = threading.Lock()


def capture_stream(device: torch.device) -> torch.cuda.Stream:
    """The one side stream per device on which every graph here is warmed up and captured.

    cuBLAS keeps a workspace per (handle, stream) until the process ends (4 MiB under CUBLAS_WORKSPACE_CONFIG
    =:4096:1, 32 MiB by default on Hopper). A fresh warm-up stream per capture, with the capture itself on
    torch's own capture stream, left one workspace per warm-up stream plus one in the graph pool; warming up
    and capturing on one stream leaves a single workspace for all graphs of the device (BENCHMARKS.md,
    "One capture stream per device")."""
    index = torch.device(device).index
    key = torch.cuda.current_device() if index is None else index
    with _STREAMS_LOCK:
        if key not in _STREAMS:
            _STREAMS[key] = torch.cuda.Stream(device=key)
        return _STREAMS[key]


def capture_cuda_graph(
    fn: Callable[[], T], device: torch.device, pool: Any = None, warmup: int = 2
) -> tuple[torch.cuda.CUDAGraph, T]:
    """fn() (over static tensors it closes over) captured as a CUDA graph -> (graph, fn's outputs, which every
    replay rewrites in place). fn runs `warmup` times first on the capture stream (compilation, autotuning and
    allocation happen outside the capture), so it must be harmless to run again. `pool`: a graph memory pool
    (torch.cuda.graph_pool_handle()) shared with the caller's other graphs."""
    side = capture_stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=side):
        out = fn()
    return graph, out
