"""The request scheduler on a fake clock: batching, bucketing, priorities, ordering, back-pressure, deadlines."""

from __future__ import annotations

import contextlib
import math
import random

import pytest

from rtvox.errors import RtvoxError
from rtvox.runtime.scheduler import (
    Batch,
    BatchResult,
    ChunkWork,
    QueueFullError,
    RequestStatus,
    SchedRequest,
    Scheduler,
    SchedulerConfig,
)


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def req(request_id: str, *counts: int, priority: int = 0, deadline: float | None = None) -> SchedRequest:
    return SchedRequest(
        request_id=request_id,
        chunks=tuple(ChunkWork(c) for c in (counts or (10,))),
        priority=priority,
        deadline=deadline,
    )


def make(clock: FakeClock | None = None, **config: object) -> Scheduler:
    return Scheduler(SchedulerConfig(**config), clock=clock or FakeClock())  # type: ignore[arg-type]


def keys(batch: Batch | None) -> list[tuple[str, int]]:
    assert batch is not None
    return [(item.request_id, item.chunk_index) for item in batch.items]


def test_batch_closes_when_full() -> None:
    sched = make(max_batch_size=4)
    for i in range(6):
        sched.add(req(f"r{i}"))
    batch = sched.schedule(0.0)
    assert keys(batch) == [(f"r{i}", 0) for i in range(4)]
    assert sched.schedule(0.0) is None  # the 2 left are neither a full batch nor old enough
    assert sched.stats().batch_size_histogram == {4: 1}


def test_batch_closes_at_max_wait_and_not_before() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=8, max_wait_s=0.010)
    sched.add(req("a"))
    clock.now = 0.004
    sched.add(req("b"))
    assert sched.schedule(0.0) is None
    assert sched.schedule(0.009) is None
    wake = sched.next_wakeup(0.009)
    assert wake == pytest.approx(0.010)
    assert wake is not None
    batch = sched.schedule(wake)
    assert keys(batch) == [("a", 0), ("b", 0)]
    assert batch is not None and batch.formed_at == wake


def test_buckets_never_mix() -> None:
    edges = (16, 32, 64)
    sched = make(max_batch_size=32, max_wait_s=0.0, bucket_edges=edges)
    counts = [5, 16, 17, 32, 33, 64, 1, 20]
    for i, c in enumerate(counts):
        sched.add(req(f"r{i}", c))
    seen = []
    while (batch := sched.schedule(0.0)) is not None:
        lo = 0 if batch.bucket == 0 else edges[batch.bucket - 1]
        assert batch.bucket_edge == edges[batch.bucket]
        assert all(lo < item.phoneme_count <= batch.bucket_edge for item in batch.items)
        seen.append(sorted(item.phoneme_count for item in batch.items))
    assert sorted(seen) == [[1, 5, 16], [17, 20, 32], [33, 64]]
    with pytest.raises(ValueError, match="longer than the largest"):
        sched.add(req("too-long", 65))


def test_first_chunk_jumps_ahead_of_later_chunks_under_load() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=2, max_wait_s=0.0)
    sched.add(req("a", 10, 10))
    sched.add(req("b", 10, 10))
    first = sched.schedule(0.0)
    assert keys(first) == [("a", 0), ("b", 0)]
    assert first is not None
    clock.now = 1.0
    sched.complete(BatchResult(first.batch_id))
    sched.add(req("c", 10, 10, priority=9))  # a late, low-priority newcomer still gets its first chunk out first
    assert keys(sched.schedule(1.0)) == [("c", 0), ("a", 1)]
    assert keys(sched.schedule(1.0)) == [("b", 1)]


def test_explicit_priority_then_fifo() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=1, max_wait_s=0.0)
    for i, priority in enumerate([5, 0, 5, 0]):
        clock.now = float(i)
        sched.add(req(f"r{i}", priority=priority))
    order = []
    while (batch := sched.schedule(10.0)) is not None:
        order += keys(batch)
    assert order == [("r1", 0), ("r3", 0), ("r0", 0), ("r2", 0)]


def test_one_chunk_in_flight_per_request_keeps_order() -> None:
    clock = FakeClock()
    sched = make(clock, max_wait_s=0.0)
    sched.add(req("a", 10, 20, 30))
    for index in range(3):
        batch = sched.schedule(clock.now)
        assert keys(batch) == [("a", index)]
        assert batch is not None and batch.items[0].is_last == (index == 2)
        clock.now += 5.0
        assert sched.schedule(clock.now) is None  # chunk index+1 waits for chunk index, however long
        assert sched.next_wakeup(clock.now) is None
        done = sched.complete(BatchResult(batch.batch_id))
        assert done.delivered == batch.items
        assert done.finished == (("a",) if index == 2 else ())
    assert sched.status("a") is None
    assert sched.stats().finished == 1


def test_queue_full_raises_with_retry_hint() -> None:
    sched = make(max_queue=2)
    sched.add(req("a"))
    sched.add(req("b"))
    with pytest.raises(QueueFullError) as info:
        sched.add(req("c"))
    assert isinstance(info.value, RtvoxError)
    assert info.value.retry_after_s >= 1
    assert "busy" in str(info.value) and f"retry after {info.value.retry_after_s} s" in str(info.value)
    assert sched.stats().rejected == 1
    assert sched.cancel("a")
    sched.add(req("c"))  # the cancelled request's slot is free at once


def test_deadline_expires_mid_request_and_drops_late_result() -> None:
    clock = FakeClock()
    sched = make(clock, max_wait_s=0.0)
    sched.add(req("slow", 10, 10, 10, deadline=1.0))
    sched.add(req("ok", 10, 10))
    first = sched.schedule(0.0)
    assert first is not None
    clock.now = 0.5
    sched.complete(BatchResult(first.batch_id))
    second = sched.schedule(0.5)
    assert keys(second) == [("slow", 1), ("ok", 1)]
    assert sched.next_wakeup(0.5) == 1.0  # woken to expire "slow"
    assert sched.expire(0.99) == []
    assert sched.expire(1.0) == ["slow"]
    assert sched.expire(1.0) == []  # reported once
    assert second is not None
    done = sched.complete(BatchResult(second.batch_id))
    assert [i.request_id for i in done.delivered] == ["ok"]
    assert [i.request_id for i in done.dropped] == ["slow"]
    assert done.finished == ("ok",)
    assert sched.stats().expired == 1


def test_expiry_inside_schedule_is_reported_by_next_expire() -> None:
    sched = make(default_deadline_s=2.0)
    sched.add(req("a"))
    assert sched.schedule(3.0) is None  # expired before it could run
    assert sched.expire(3.0) == ["a"]


def test_cancel_frees_slot_and_drops_late_result_even_if_id_is_reused() -> None:
    clock = FakeClock()
    sched = make(clock, max_wait_s=0.0, max_queue=1)
    sched.add(req("a", 10, 10))
    batch = sched.schedule(0.0)
    assert batch is not None
    assert sched.cancel("a") and not sched.cancel("a")
    assert sched.stats().queue_depth == sched.stats().running == 0
    sched.add(req("a", 10))  # the same id, a new request
    done = sched.complete(BatchResult(batch.batch_id))
    assert done.delivered == () and [i.chunk_index for i in done.dropped] == [0]
    assert keys(sched.schedule(0.0)) == [("a", 0)]  # the new request is unaffected
    with pytest.raises(ValueError, match="already completed"):
        sched.complete(BatchResult(batch.batch_id))


def test_bad_input_and_config_are_refused() -> None:
    sched = make()
    sched.add(req("a"))
    with pytest.raises(ValueError, match="already queued"):
        sched.add(req("a"))
    with pytest.raises(ValueError, match="no chunks"):
        SchedRequest("x", ())
    with pytest.raises(ValueError, match="strictly increasing"):
        SchedulerConfig(bucket_edges=(32, 16))
    with pytest.raises(ValueError, match="max_batch_size"):
        SchedulerConfig(max_batch_size=0)
    assert sched.status("a") is RequestStatus.WAITING


@pytest.mark.parametrize("seed", range(8))
def test_no_request_is_ever_lost(seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    config = SchedulerConfig(max_batch_size=(1, 3, 8)[seed % 3], max_wait_s=0.01, max_queue=12)
    sched = Scheduler(config, clock=clock)
    chunks: dict[str, int] = {}  # request id → number of chunks
    ended: dict[str, list[str]] = {}  # request id → terminal events
    delivered: dict[str, list[int]] = {}  # request id → chunk indexes delivered, in order
    in_flight: list[Batch] = []
    next_id = 0
    scheduled = 0  # chunk items released in batches

    def end(request_id: str, how: str) -> None:
        ended.setdefault(request_id, []).append(how)

    def complete_one() -> None:
        batch = in_flight.pop(rng.randrange(len(in_flight)))
        done = sched.complete(BatchResult(batch.batch_id))
        for item in done.delivered:
            assert item.request_id not in ended, "audio delivered after the request ended"
            delivered.setdefault(item.request_id, []).append(item.chunk_index)
        for request_id in done.finished:
            end(request_id, "finished")

    for step in range(600):
        clock.now += rng.uniform(0.0, 0.02)
        draining = step >= 400
        if not draining and rng.random() < 0.5:
            n = rng.randint(1, 4)
            request = SchedRequest(
                request_id=f"r{next_id}",
                chunks=tuple(ChunkWork(rng.randint(1, 200)) for _ in range(n)),
                priority=rng.randint(0, 2),
                deadline=clock.now + rng.uniform(0.05, 2.0) if rng.random() < 0.3 else None,
            )
            try:
                sched.add(request)
                chunks[request.request_id] = n
            except QueueFullError as error:
                assert error.retry_after_s >= 1
            next_id += 1
        if not draining and chunks and rng.random() < 0.05:
            victim = rng.choice(sorted(chunks))
            if sched.cancel(victim):
                end(victim, "cancelled")
        for request_id in sched.expire(clock.now):
            end(request_id, "expired")
        while (batch := sched.schedule(clock.now)) is not None:
            assert 1 <= len(batch.items) <= config.max_batch_size
            assert len({i.request_id for i in batch.items}) == len(batch.items)
            assert {config.bucket_of(i.phoneme_count) for i in batch.items} == {batch.bucket}
            in_flight.append(batch)
            scheduled += len(batch.items)
        if in_flight and (draining or rng.random() < 0.6):
            complete_one()
        if draining and not in_flight and sched.next_wakeup(clock.now) is None:
            break
    else:
        pytest.fail("the scheduler did not drain")

    for request_id in sched.expire(clock.now):
        end(request_id, "expired")
    stats = sched.stats()
    assert stats.queue_depth == stats.running == stats.in_flight_batches == 0
    assert set(ended) == set(chunks), "every added request ends"
    assert all(len(events) == 1 for events in ended.values()), "and ends exactly once"
    for request_id, (how,) in ended.items():
        got = delivered.get(request_id, [])
        if how == "finished":
            assert got == list(range(chunks[request_id]))
        else:
            assert got == list(range(len(got)))  # a cancelled or expired request got an in-order prefix
    assert stats.finished + stats.cancelled + stats.expired == stats.added == len(chunks)
    assert sum(size * n for size, n in stats.batch_size_histogram.items()) == scheduled


def test_later_chunk_about_to_run_dry_goes_before_new_first_chunks() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=1, max_wait_s=0.0, urgent_slack_s=0.5)
    sched.add(req("a", 10, 10))
    sched.add(req("b", 10, 10))
    first = sched.schedule(0.0)
    assert keys(first) == [("a", 0)] and first is not None
    clock.now = 0.1
    # a's first chunk holds 2 s of audio: it plays until 2.1, so a's next chunk is not urgent yet
    sched.complete(BatchResult(first.batch_id, audio_seconds=(2.0,)))
    second = sched.schedule(0.1)
    assert keys(second) == [("b", 0)] and second is not None
    clock.now = 0.2
    sched.complete(BatchResult(second.batch_id, audio_seconds=(0.3,)))  # b plays until 0.5: urgent
    sched.add(req("c", 10, 10))
    sched.add(req("d", 10, 10))
    clock.now = 1.7  # a runs dry at 2.1, b ran dry at 0.5; newcomers c and d arrived at 0.2
    order = [keys(sched.schedule(clock.now)) for _ in range(4)]
    # earliest due first: b (0.5 - 0.5 = 0.0), then c and d (arrived 0.2), then a (2.1 - 0.5 = 1.6)
    assert order == [[("b", 1)], [("c", 0)], [("d", 0)], [("a", 1)]]


def test_audio_seconds_must_match_the_batch() -> None:
    sched = make(max_batch_size=2, max_wait_s=0.0)
    sched.add(req("a"))
    batch = sched.schedule(0.0)
    assert batch is not None
    with pytest.raises(ValueError, match="audio lengths"):
        sched.complete(BatchResult(batch.batch_id, audio_seconds=(1.0, 2.0)))


def test_phoneme_budget_keeps_batches_short_and_releases_them_at_once() -> None:
    sched = make(max_batch_size=8, max_wait_s=10.0, max_batch_phonemes=100)
    for name in "abcd":
        sched.add(req(name, 40))
    first = sched.schedule(0.0)  # 4 x 40 > 100: the budget is full, no need to wait for max_wait
    assert keys(first) == [("a", 0), ("b", 0)]
    assert sched.schedule(0.0) is None  # c and d fit together: wait for company as usual
    assert keys(sched.schedule(10.0)) == [("c", 0), ("d", 0)]
    big = make(max_batch_size=8, max_wait_s=0.0, max_batch_phonemes=100, bucket_edges=(200,))
    big.add(req("long", 150))
    big.add(req("short", 10))
    assert keys(big.schedule(0.0)) == [("long", 0)]  # larger than the budget: runs, alone
    assert keys(big.schedule(0.0)) == [("short", 0)]
    with pytest.raises(ValueError, match="max_batch_phonemes"):
        SchedulerConfig(max_batch_phonemes=0)


def test_first_chunks_can_have_a_shorter_wait_than_later_chunks() -> None:
    """first_chunk_max_wait_s=0: a request's first chunk goes at once (time to first audio); a later chunk still
    waits max_wait_s for company."""
    clock = FakeClock()
    sched = make(clock, max_batch_size=8, max_wait_s=0.010, first_chunk_max_wait_s=0.0)
    sched.add(req("a", 10, 10))
    first = sched.schedule(0.0)
    assert keys(first) == [("a", 0)]
    assert first is not None
    clock.now = 0.001
    sched.complete(BatchResult(first.batch_id, audio_seconds=(1.0,)))
    assert sched.schedule(0.001) is None  # the later chunk waits for company
    assert sched.next_wakeup(0.001) == pytest.approx(0.011)
    assert keys(sched.schedule(0.011)) == [("a", 1)]


def _scan_batch(sched: Scheduler, now: float) -> tuple[list[tuple[str, int]], float | None]:
    """The batch schedule(now) must release and next_wakeup(now)'s answer, by the rules scanned over every live
    request (the scheduler's own heaps must agree)."""
    cfg = sched.config
    live = [s for s in sched._live.values() if s.deadline is None or s.deadline > now]
    buckets: dict[int, list] = {}  # type: ignore[type-arg]
    for state in live:
        if state.eligible():
            buckets.setdefault(cfg.bucket_of(state.request.chunks[state.next_chunk].phoneme_count), []).append(state)
    releases = {}
    for bucket, states in buckets.items():
        states.sort(key=lambda s: s.sort_key(now, cfg.urgent_slack_s))
        if len(states) >= cfg.max_batch_size or len(sched._take(states)) < len(states):
            releases[bucket] = -float("inf")
        else:
            first_wait = cfg.first_chunk_max_wait_s
            waits = [] if first_wait is None else [s.ready_at + first_wait for s in states if s.next_chunk == 0]
            releases[bucket] = min([min(s.ready_at for s in states) + cfg.max_wait_s, *waits])
    due = [b for b, t in releases.items() if t <= now]
    batch: list[tuple[str, int]] = []
    if due:
        bucket = min(due, key=lambda b: buckets[b][0].sort_key(now, cfg.urgent_slack_s))
        batch = [(s.request.request_id, s.next_chunk) for s in sched._take(buckets[bucket])]
    times = [*releases.values(), *(s.deadline for s in live if s.deadline is not None)]
    return batch, (max(now, min(times)) if times else None)


@pytest.mark.parametrize("seed", range(6))
def test_batches_follow_the_rules_over_long_random_runs(seed: int) -> None:
    """Thousands of random arrivals, steps, completions (with and without audio lengths), cancellations and
    deadlines: every schedule() and next_wakeup() answer equals the rules applied by a scan of every live request."""
    rng = random.Random(seed)
    clock = FakeClock()
    sched = make(
        clock,
        max_batch_size=rng.choice([1, 4, 8]),
        max_wait_s=rng.choice([0.0, 0.01]),
        first_chunk_max_wait_s=rng.choice([None, 0.0, 0.004]),
        max_batch_phonemes=rng.choice([None, 60]),
        bucket_edges=(16, 32, 64),
        max_queue=64,
        urgent_slack_s=0.05,
    )
    in_flight: list[Batch] = []
    n = 0
    for _ in range(1500):
        clock.now += rng.choice([0.0, 0.001, 0.003, 0.02])
        op = rng.random()
        if op < 0.35:
            chunks = [rng.randint(1, 64) for _ in range(rng.randint(1, 4))]
            deadline = clock.now + rng.uniform(0.01, 0.3) if rng.random() < 0.3 else None
            with contextlib.suppress(QueueFullError):
                sched.add(req(f"r{n}", *chunks, priority=rng.choice([0, 0, 1]), deadline=deadline))
            n += 1
        elif op < 0.45 and sched._live:
            sched.cancel(rng.choice(list(sched._live)))
        elif op < 0.7 and in_flight:
            batch = in_flight.pop(rng.randrange(len(in_flight)))
            seconds = None if rng.random() < 0.2 else tuple(rng.uniform(0.05, 0.3) for _ in batch.items)
            sched.complete(BatchResult(batch.batch_id, audio_seconds=seconds))
        want, wake = _scan_batch(sched, clock.now)
        got = sched.schedule(clock.now)
        assert (keys(got) if got is not None else []) == want
        if got is not None:
            in_flight.append(got)
        else:
            assert sched.next_wakeup(clock.now) == wake
        sched.expire(clock.now)
    assert sched.stats().eligible_chunks == sum(1 for s in sched._live.values() if s.eligible())


def test_a_chunk_longer_than_every_bucket_is_the_callers_error_and_queues_nothing() -> None:
    """The HTTP layer answers InputError with a 400 (a 500 before): say which limit the text broke."""
    from rtvox.errors import InputError

    sched = make(bucket_edges=(16, 64))
    with pytest.raises(InputError, match=r"65 phonemes .* largest the engines take \(64\)") as caught:
        sched.add(req("long", 10, 65))
    assert caught.value.param == "input"
    assert sched.stats().queue_depth == 0 and sched.schedule(10.0) is None
    sched.add(req("ok", 64))  # a chunk at the edge fits


def test_a_deadline_moved_later_replaces_the_old_one() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=1, max_wait_s=0.0)
    sched.add(req("a", 10, 10, deadline=1.0))
    sched.extend_deadline("a", 3.0)
    sched.extend_deadline("a", 2.0)  # never earlier
    sched.extend_deadline("nobody", 9.0)  # unknown ids are left alone
    assert sched.expire(2.5) == []
    assert sched.next_wakeup(2.5) == pytest.approx(2.5)  # its first chunk is ready now
    assert sched.schedule(2.5) is not None
    assert sched.next_wakeup(2.5) == pytest.approx(3.0)  # the new deadline, not the replaced 1.0
    assert sched.expire(3.0) == ["a"]


def test_retry_hint_follows_the_completion_rate_of_overlapping_batches() -> None:
    # Four batches in flight, each 0.4 s from forming to completion, one completing every 0.1 s: the queue drains
    # at 10 batches a second, so 16 queued single-chunk batches are ~1.6 s of work, not 16 x 0.4 s.
    clock = FakeClock()
    sched = make(clock, max_batch_size=1, max_queue=1000)
    for i in range(200):
        sched.add(req(f"r{i}", 1))
    in_flight = []
    for _ in range(4):
        batch = sched.schedule()
        assert batch is not None
        in_flight.append(batch)
        clock.now += 0.1
    for _ in range(100):
        sched.complete(BatchResult(in_flight.pop(0).batch_id))
        batch = sched.schedule()
        assert batch is not None
        in_flight.append(batch)
        clock.now += 0.1
    while in_flight:
        sched.complete(BatchResult(in_flight.pop(0).batch_id))
        clock.now += 0.1
    for i in range(200, 216):  # the 96 left plus 16 more: 112 batches' work queued
        sched.add(req(f"r{i}", 1))
    assert sched.stats().eligible_chunks == 112
    assert sched.retry_after_s() == math.ceil(112 * 0.1)


def test_retry_hint_ignores_idle_time_between_batches() -> None:
    clock = FakeClock()
    sched = make(clock, max_batch_size=1, max_queue=1000)
    for i in range(30):
        sched.add(req(f"r{i}", 1))
        batch = sched.schedule()
        assert batch is not None
        clock.now += 0.5  # each batch takes 0.5 s ...
        sched.complete(BatchResult(batch.batch_id))
        clock.now += 10.0  # ... and the service then idles for 10 s
    for i in range(30, 50):
        sched.add(req(f"r{i}", 1))
    assert sched.retry_after_s() == math.ceil(20 * 0.5)


def test_separate_first_chunks_keeps_first_and_later_chunks_in_different_batches() -> None:
    """With separate_first_chunks a batch is all first chunks or all later chunks (a first chunk beside a long
    later chunk would wait for it); without, they share a bucket's batch, first chunks first."""
    for separate in (True, False):
        clock = FakeClock()
        sched = make(clock, max_batch_size=8, max_wait_s=0.0, separate_first_chunks=separate)
        sched.add(req("a", 10, 10))
        assert keys(sched.schedule()) == [("a", 0)]
        sched.complete(BatchResult(0, audio_seconds=(10.0,)))  # far from running dry: an ordinary later chunk
        clock.now = 0.5
        sched.add(req("b", 10))
        sched.add(req("c", 10))
        batch = sched.schedule()
        if separate:
            assert keys(batch) == [("b", 0), ("c", 0)]
            assert keys(sched.schedule()) == [("a", 1)]
        else:
            assert keys(batch) == [("b", 0), ("c", 0), ("a", 1)]
            assert sched.schedule() is None


def test_firsts_only_releases_first_chunks_after_their_wait_and_nothing_else() -> None:
    """schedule(firsts_only=True) (a batch to overtake a step in progress) takes only first chunks, due when the
    oldest has waited first_chunk_max_wait_s (max_wait_s when None); next_wakeup(firsts_only=True) says when,
    ignoring later chunks that are due."""
    clock = FakeClock()
    sched = make(clock, max_batch_size=8, max_wait_s=0.010, first_chunk_max_wait_s=0.004)
    sched.add(req("a", 10, 10))
    assert keys(sched.schedule(0.010)) == [("a", 0)]
    sched.complete(BatchResult(0, audio_seconds=(1.0,)))  # a's later chunk is eligible from now (0)
    clock.now = 0.020
    assert sched.schedule(firsts_only=True) is None  # a's later chunk is due, but is not a first chunk
    assert sched.next_wakeup(firsts_only=True) is None
    sched.add(req("b", 10))
    sched.add(req("c", 12))
    assert sched.next_wakeup(firsts_only=True) == pytest.approx(0.024)
    assert sched.schedule(0.023, firsts_only=True) is None
    assert keys(sched.schedule(0.025, firsts_only=True)) == [("b", 0), ("c", 0)]
    assert keys(sched.schedule(0.025)) == [("a", 1)]  # the ordinary path still serves the later chunk
    no_first_wait = make(FakeClock(), max_wait_s=0.010)
    no_first_wait.add(req("d", 10))
    assert no_first_wait.schedule(0.009, firsts_only=True) is None
    assert keys(no_first_wait.schedule(0.010, firsts_only=True)) == [("d", 0)]


def test_separate_first_chunks_counts_the_phoneme_budget_within_one_kind() -> None:
    """A bucket holding a first chunk and a later chunk whose sum passes max_batch_phonemes is not "full" when
    batches hold one kind: each fits alone, so the bucket still waits max_wait_s."""
    clock = FakeClock()
    sched = make(clock, max_wait_s=0.010, max_batch_phonemes=15, separate_first_chunks=True)
    sched.add(req("a", 10, 10))
    assert keys(sched.schedule(0.010)) == [("a", 0)]
    sched.complete(BatchResult(0, audio_seconds=(10.0,)))  # clock 0: a's later chunk is ready from now
    clock.now = 0.001
    sched.add(req("b", 10))
    assert sched.schedule(0.005) is None  # not released as a full batch
    assert keys(sched.schedule(0.011)) == [("b", 0)]  # first chunks first, alone
    assert keys(sched.schedule(0.011)) == [("a", 1)]
