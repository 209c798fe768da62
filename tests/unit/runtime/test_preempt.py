"""Preemption points (rtvox.runtime.preempt): urgent work runs inside a step in progress, exactly once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rtvox.runtime.preempt import UrgentQueue, preemptible, preemption_point


def test_a_preemption_point_outside_a_preemptible_block_does_nothing() -> None:
    calls: list[str] = []
    preemption_point()
    with preemptible(lambda: calls.append("hook")):
        preemption_point()
        with preemptible(None):  # nested work is not itself preemptible
            preemption_point()
        preemption_point()
    preemption_point()
    assert calls == ["hook", "hook"]


def test_urgent_work_runs_at_the_next_preemption_point_of_the_step_in_progress() -> None:
    """A long step on the engine thread reaches a preemption point after the urgent job was submitted: the job
    runs there (once), before the step's later stages, and the pool's own turn for it does nothing."""
    queue, pool = UrgentQueue(), ThreadPoolExecutor(1)
    events: list[str] = []
    started, submitted = threading.Event(), threading.Event()

    def long_step() -> str:
        with preemptible(queue.run_pending):
            events.append("step: stage 1")
            started.set()
            assert submitted.wait(10)
            preemption_point()
            events.append("step: stage 2")
        return "step done"

    step = pool.submit(long_step)
    assert started.wait(10)
    urgent = queue.submit(pool, lambda: events.append("urgent") or "urgent done")
    submitted.set()
    assert step.result(10) == "step done" and urgent.result(10) == "urgent done"
    pool.submit(lambda: None).result(10)  # the pool's turn for the urgent job has come and gone
    assert events == ["step: stage 1", "urgent", "step: stage 2"]
    assert queue.preemptions == 1 and queue.nested_s > 0
    pool.shutdown()


def test_urgent_work_with_no_step_in_progress_runs_on_the_pool_and_errors_reach_the_waiter() -> None:
    queue, pool = UrgentQueue(), ThreadPoolExecutor(1)
    assert queue.submit(pool, lambda: 42).result(10) == 42

    def broken() -> None:
        raise ValueError("engine fault")

    with pytest.raises(ValueError, match="engine fault"):
        queue.submit(pool, broken).result(10)
    with preemptible(queue.run_pending):  # both already ran: nothing left to run here
        preemption_point()
    assert queue.preemptions == 0 and queue.nested_s == 0.0
    pool.shutdown()


def test_a_cancelled_urgent_job_never_runs() -> None:
    queue, pool = UrgentQueue(), ThreadPoolExecutor(1)
    gate = threading.Event()
    blocker = pool.submit(gate.wait, 10)
    ran: list[int] = []
    future = queue.submit(pool, lambda: ran.append(1))
    assert future.cancel()
    with preemptible(queue.run_pending):
        preemption_point()
    gate.set()
    blocker.result(10)
    pool.submit(lambda: None).result(10)
    time.sleep(0.01)
    assert ran == [] and queue.preemptions == 0
    pool.shutdown()
