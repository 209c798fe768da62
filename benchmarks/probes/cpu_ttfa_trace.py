"""Where a CPU serving level's slow first chunks spend their time (issue 5's 2-core target, P99 TTFA <= 500 ms).

Runs one in-process load level as `benchmarks/load_bench.py` does (same texts, listeners, think times), with the
executor instrumented: every engine-thread job (prepare or step) with its submit, start and end times and, for a
step, its rows; every request's frontend span. Then splits each request's TTFA into
  front     text frontend (its own thread)
  q_prep    waiting for the engine thread to take its prepare (realistic durations: the encoder runs there)
  prep      the prepare itself
  q_step    prepare done -> the step carrying its first chunk starts
  step      that step
  deliver   step end -> the client sees the chunk
and, for the slowest requests, which jobs held the engine thread while they waited.

    .venv/bin/python benchmarks/probes/cpu_ttfa_trace.py OUT.json [--backend auto] [--seconds 90] [--clients 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import dataclasses
import json
import time
from typing import Any

import numpy as np

from rtvox.runtime import executor as ex_mod
from rtvox.runtime.executor import warm_up
from rtvox.runtime.loadbench import ListenerPlan, _request, make_texts
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.synthesizer import Synthesizer

JOBS: list[dict[str, Any]] = []
PREPS: dict[int, dict[str, Any]] = {}  # id(request) -> spans
PREPARED_OF: dict[int, int] = {}  # id(prepared) -> id(request)
SERIAL = iter(range(1, 1 << 62))
ROWS: contextvars.ContextVar[list | None] = contextvars.ContextVar("rows", default=None)


def instrument() -> None:
    orig_call = ex_mod.Executor._call

    async def _call(self, engines, fn, *, step=False, urgent=False):  # type: ignore[no-untyped-def]
        rec: dict[str, Any] = {"kind": "step" if step else "job", "submit": time.perf_counter(), "urgent": urgent}
        if step and ROWS.get() is not None:
            rec["rows"] = ROWS.get()
        JOBS.append(rec)

        def timed():  # type: ignore[no-untyped-def]
            rec["start"] = time.perf_counter()
            try:
                return fn()
            finally:
                rec["end"] = time.perf_counter()

        return await orig_call(self, engines, timed, step=step, urgent=urgent)

    orig_run = ex_mod.Executor.run

    async def run(self, jobs, **kwargs):  # type: ignore[no-untyped-def]
        ROWS.set([(PREPARED_OF.get(id(j.prepared)), j.index, len(j.prepared.chunks[j.index].ids)) for j in jobs])
        return await orig_run(self, jobs, **kwargs)

    async def prepare(self, request):  # type: ignore[no-untyped-def]
        spans = PREPS.setdefault(id(request), {})
        spans["serial"] = next(SERIAL)
        spans["front0"] = time.perf_counter()
        loop = asyncio.get_running_loop()
        front = await loop.run_in_executor(self._frontend_pool, self._read_text, request.text)
        spans["front1"] = time.perf_counter()
        serving = self.primary
        if serving.synth.prepares_on_host(request):
            prepared = serving.synth.prepare(request, front)
            spans["host_prep"] = True
        else:
            n = len(JOBS)
            prepared = await self._serve(lambda synth: synth.prepare(request, front), urgent=True)
            spans["job"] = n
        spans["prep1"] = time.perf_counter()
        PREPARED_OF[id(prepared)] = spans["serial"]  # looked up while `prepared` lives: ids are not reused then
        return prepared

    ex_mod.Executor._call = _call  # type: ignore[method-assign]
    ex_mod.Executor.run = run  # type: ignore[method-assign]
    ex_mod.Executor.prepare = prepare  # type: ignore[method-assign]


async def level(synth: Synthesizer, config: ServiceConfig, clients: int, seconds: float, seed: int) -> list[dict]:
    texts = make_texts(512, seed)
    service = TTSService(synth, config)
    await service.start()
    rng = np.random.default_rng(seed)
    plan = ListenerPlan.draw(rng, texts, clients, seconds, 0.5)
    end = time.perf_counter() + seconds
    reqs: list[dict[str, Any]] = []

    async def client(index: int) -> None:
        n = 0
        await asyncio.sleep(plan.start_delay(index, True))
        while time.perf_counter() < end:
            item = plan.text(texts, index, n)
            request = _request(item, True)
            rec: dict[str, Any] = {"rid": id(request), "t0": time.perf_counter(), "chars": len(item.text)}
            arrivals, secs = [], []
            async for chunk in service.stream(request, deadline_s=None):
                arrivals.append(time.perf_counter())
                secs.append(chunk.seconds)
            rec.update(first=arrivals[0], audio_s=sum(secs), chunks=len(secs))
            rec.update(PREPS.pop(id(request), {}))
            reqs.append(rec)
            await asyncio.sleep(max(0.0, arrivals[0] + sum(secs) - time.perf_counter()))
            n += 1
            await asyncio.sleep(plan.think_s(index, n))

    await asyncio.gather(*(client(i) for i in range(clients)))
    await service.stop()
    return reqs


def analyse(reqs: list[dict], jobs: list[dict]) -> dict[str, Any]:
    steps = [j for j in jobs if j["kind"] == "step" and "end" in j]
    rows = []
    for r in reqs:
        first_step = next(
            (s for s in steps if any(row[0] == r["serial"] and row[1] == 0 for row in s.get("rows", []))), None
        )
        prep_job = jobs[r["job"]] if "job" in r else None
        t = {
            "ttfa": r["first"] - r["t0"],
            "front": r["front1"] - r["front0"],
            "pre_front": r["front0"] - r["t0"],
            "q_prep": (prep_job["start"] - prep_job["submit"]) if prep_job else 0.0,
            "prep": (prep_job["end"] - prep_job["start"]) if prep_job else 0.0,
            "q_step": (first_step["start"] - r["prep1"]) if first_step else float("nan"),
            "step": (first_step["end"] - first_step["start"]) if first_step else float("nan"),
            "deliver": (r["first"] - first_step["end"]) if first_step else float("nan"),
            "first_rows": len(first_step["rows"]) if first_step else 0,
        }
        if t["ttfa"] > 0.4:  # what held the engine thread between arrival and the first chunk's step
            busy = [
                (
                    j["kind"] + ("!" if j["urgent"] else ""),
                    round((j["end"] - j["start"]) * 1000),
                    [x[2] for x in j.get("rows", [])],
                    [x[1] for x in j.get("rows", [])],
                )
                for j in jobs
                if "end" in j and j["end"] > r["t0"] and j["start"] < r["first"]
            ]
            t["held_by"] = busy
        rows.append(t)
    keys = ["ttfa", "pre_front", "front", "q_prep", "prep", "q_step", "step", "deliver"]
    arr = {k: np.array([x[k] for x in rows]) * 1000 for k in keys}
    order = np.argsort(-arr["ttfa"])
    step_ms = np.array([(s["end"] - s["start"]) * 1000 for s in steps])
    job_ms = np.array([(j["end"] - j["start"]) * 1000 for j in jobs if j["kind"] == "job" and "end" in j])
    return {
        "requests": len(rows),
        "p50": {k: float(np.nanmedian(v)) for k, v in arr.items()},
        "p99_ttfa": float(np.percentile(arr["ttfa"], 99)),
        "slowest": [rows[i] for i in order[:8]],
        "step_ms": {
            "n": len(step_ms),
            "p50": float(np.median(step_ms)),
            "p90": float(np.percentile(step_ms, 90)),
            "max": float(step_ms.max()),
        },
        "prep_job_ms": {
            "n": len(job_ms),
            "p50": float(np.median(job_ms)) if len(job_ms) else 0.0,
            "max": float(job_ms.max()) if len(job_ms) else 0.0,
        },
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--backend", default="auto")
    p.add_argument("--seconds", type=float, default=90.0)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-preempt", action="store_true", help="ServiceConfig(preempt_steps=False)")
    p.add_argument("--max-chunk-phonemes", type=int, default=None, help="ServiceConfig.max_chunk_phonemes")
    a = p.parse_args()
    instrument()
    synth = Synthesizer(None, device="cpu", backend=a.backend)
    warm_up(synth)
    config = ServiceConfig(
        fallback_device=None, default_deadline_s=None, max_queue=1024, preempt_steps=not a.no_preempt
    )
    if a.max_chunk_phonemes is not None:
        config = dataclasses.replace(config, max_chunk_phonemes=a.max_chunk_phonemes)
    reqs = asyncio.run(level(synth, config, a.clients, a.seconds, a.seed))
    res = analyse(reqs, JOBS)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(json.dumps({k: res[k] for k in ("requests", "p50", "p99_ttfa", "step_ms", "prep_job_ms")}, indent=1))
    for s in res["slowest"][:6]:
        print({k: (round(v * 1000) if isinstance(v, float) else v) for k, v in s.items() if k != "held_by"})
        print("   held:", s.get("held_by"))


if __name__ == "__main__":
    main()
