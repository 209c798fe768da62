"""Capturing a function as a CUDA graph: the one recipe every graphed path here uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def capture_cuda_graph(
    fn: Callable[[], T], device: torch.device, pool: Any = None, warmup: int = 2
) -> tuple[torch.cuda.CUDAGraph, T]:
    """fn() (over static tensors it closes over) captured as a CUDA graph -> (graph, fn's outputs, which every
    replay rewrites in place). fn runs `warmup` times first on a side stream (compilation, autotuning and
    allocation happen outside the capture), so it must be harmless to run again. `pool`: a graph memory pool
    (torch.cuda.graph_pool_handle()) shared with the caller's other graphs."""
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()
    return graph, out
