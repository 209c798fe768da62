"""Executor.split_steps: a step's launch on the engine thread, its finish on another, so the engine thread can
launch the next batch while the last one is still being finished; a failure in either half goes to the fallback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from rtvox.runtime.executor import Executor
from rtvox.runtime.types import AudioChunk


def chunk(tag: float) -> AudioChunk:
    return AudioChunk(index=0, audio=np.full(4, tag, dtype=np.float32), text="", is_last=True)


class TwoPhaseRunner:
    """A StepRunner whose step is a launch (recorded, on the engine thread) and a finish that waits for `release`;
    `fail_in` names the half that raises."""

    backend = "fake"

    def __init__(self, release: threading.Event, fail_in: str | None = None) -> None:
        self.device = torch.device("cpu")
        self.frontend = SimpleNamespace(process=lambda text: text)
        self.release, self.fail_in = release, fail_in
        self.launched: list[tuple[float, str]] = []
        self.finished_on: list[str] = []

    def launch_step(self, jobs: Sequence[Any]) -> Callable[[], list[AudioChunk]]:
        self.launched.append((jobs[0], threading.current_thread().name))
        if self.fail_in == "launch":
            raise RuntimeError("launch failed (injected)")

        def finish() -> list[AudioChunk]:
            assert self.release.wait(10), "finish waited for a launch that never came"
            self.finished_on.append(threading.current_thread().name)
            if self.fail_in == "finish":
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected, surfacing at the sync)")
            return [chunk(jobs[0])]

        return finish

    def run_step(self, jobs: Sequence[Any]) -> list[AudioChunk]:
        return self.launch_step(jobs)()


def test_the_engine_thread_launches_the_next_step_while_the_last_one_finishes() -> None:
    release = threading.Event()
    runner = TwoPhaseRunner(release)
    executor = Executor(runner, None, split_steps=True)  # type: ignore[arg-type]

    async def main() -> list[list[AudioChunk]]:
        first = asyncio.create_task(executor.run([1.0]))  # type: ignore[list-item]
        while len(runner.launched) < 1:
            await asyncio.sleep(0.001)
        # the first step's finish is blocked until a second step has been launched: only a split executor gets there
        second = asyncio.create_task(executor.run([2.0]))  # type: ignore[list-item]
        while len(runner.launched) < 2:
            await asyncio.sleep(0.001)
        release.set()
        return list(await asyncio.gather(first, second))

    results = asyncio.run(main())
    assert [float(r[0].audio[0]) for r in results] == [1.0, 2.0]
    assert all(name.startswith("rtvox-primary") for _, name in runner.launched)
    assert all(name.startswith("rtvox-finish") for name in runner.finished_on)
    assert executor.primary.steps == 2 and executor.primary.faults == 0


@pytest.mark.parametrize("fail_in", ["launch", "finish"])
def test_a_failure_in_either_half_reruns_the_step_on_the_fallback(
    fail_in: str, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    release.set()
    primary, fallback = TwoPhaseRunner(release, fail_in=fail_in), TwoPhaseRunner(release)
    executor = Executor(primary, fallback, split_steps=True)  # type: ignore[arg-type]

    async def main() -> list[AudioChunk]:
        try:
            return await executor.run([7.0])  # type: ignore[list-item]
        finally:
            await executor.stop()

    got = asyncio.run(main())
    assert float(got[0].audio[0]) == 7.0 and fallback.launched and fallback.finished_on
    assert executor.primary.faults == 1 and not executor.primary.healthy
    assert executor.fallback_steps == 1
    expected = "RuntimeError" if fail_in == "launch" else "OutOfMemoryError"
    # the fault as logged (the error field moves on: the fake cannot be rebuilt, so its rebuild fails next)
    assert f"primary engines failed ({expected}" in caplog.text
