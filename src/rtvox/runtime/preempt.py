"""Preemption points: where a long chunk step on an engine thread lets urgent work run before it goes on.

An engine set runs on one thread, and a step, once started, used to run to its end. On a CPU a later chunk of
a long reply is hundreds of milliseconds of work (a 150-phoneme chunk: ~13 s of audio, ~0.5 s on two cores), and a
request arriving meanwhile waited for all of it before its own prepare and first chunk could start: most of the
2-core serving tail (benchmarks/probes/cpu_ttfa_trace.py). Now the executor hands urgent work (prepares, batches of
first chunks) to an `UrgentQueue` as well as to the engine thread's pool; a step running on that thread calls
`preemption_point()` between its stages (after the encoder, after the decoder, between vocoder windows), which runs
whatever urgent work is waiting, right there, then returns to the step. The step's result does not change: its
stages are pure, and the urgent work touches none of its tensors. A job runs exactly once: whichever comes first,
a preemption point or the pool, claims it.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_local = threading.local()


def preemption_point() -> None:
    """Run the urgent work waiting for this thread's engines, if the running step allows it (a no-op elsewhere)."""
    hook = getattr(_local, "hook", None)
    if hook is not None:
        hook()


@contextlib.contextmanager
def preemptible(hook: Callable[[], None] | None) -> Iterator[None]:
    """Within the block, `preemption_point()` on this thread calls `hook` (None: does nothing)."""
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous


class _Job:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self._lock = threading.Lock()
        self._claimed = False

    @property
    def claimed(self) -> bool:
        return self._claimed

    def run(self) -> bool:
        """Run `fn` into the future unless someone else has, or the waiter cancelled it; True if it ran here."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
        if not self.future.set_running_or_notify_cancel():
            return False
        try:
            result = self.fn()
        except BaseException as exc:  # the waiter gets it, as from a pool
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)
        return True


class UrgentQueue:
    """Urgent jobs of one engine thread: each also goes to the thread's pool, so it runs at the first preemption
    point of a step that is running, or when the thread is next free, whichever comes first."""

    def __init__(self) -> None:
        self._jobs: collections.deque[_Job] = collections.deque()  # append / popleft are atomic
        self.nested_s = 0.0  # seconds urgent jobs ran inside other jobs (those jobs' timers subtract it)
        self.preemptions = 0  # urgent jobs run at a preemption point

    def submit(self, pool: ThreadPoolExecutor, fn: Callable[[], Any]) -> Future[Any]:
        job = _Job(fn)
        self._jobs.append(job)
        pool.submit(self._from_pool, job)
        return job.future

    def _from_pool(self, job: _Job) -> None:
        """The pool's turn (on the engine thread, the only one that pops): run the job unless a preemption point
        did, and drop the finished jobs at the queue's head."""
        job.run()
        while self._jobs and self._jobs[0].claimed:
            self._jobs.popleft()

    def run_pending(self) -> None:
        """At a preemption point (on the engine thread): run the jobs waiting, oldest first, not preemptible."""
        while True:
            try:
                job = self._jobs.popleft()
            except IndexError:
                return
            start = time.perf_counter()
            with preemptible(None):
                ran = job.run()
            if ran:
                self.preemptions += 1
                self.nested_s += time.perf_counter() - start
