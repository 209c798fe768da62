"""Serving load benchmark (see rtvox.runtime.loadbench): prints progress to stderr and the JSON result to stdout.

.venv/bin/python benchmarks/load_bench.py --levels 1,2,4,8 --level-seconds 15 > benchmarks/results/load.json

Against a running server instead (rtvox.runtime.httpload; the server's own flags set its engines and batching):
.venv/bin/python benchmarks/load_bench.py --url http://127.0.0.1:8000 --levels 1,8,16 --client-processes 2 > load.json
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys

from rtvox.constants import FIRST_CHUNK_PHONEMES
from rtvox.runtime.loadbench import run_load_bench
from rtvox.runtime.service import ServiceConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None, help="model directory or shipped name (default: the shipped default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--levels", default="1,2,4,8,12,16,24,32", help="comma-separated client counts")
    parser.add_argument("--level-seconds", type=float, default=15.0)
    parser.add_argument("--think-seconds", type=float, default=0.5, help="mean think time between requests")
    parser.add_argument("--ttfa-p99-ms", type=float, default=150.0)
    parser.add_argument("--baseline-requests", type=int, default=20)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--max-wait-ms", type=float, default=10.0)
    parser.add_argument("--max-batch-phonemes", type=int, default=None, help="phoneme budget per batched step")
    parser.add_argument(
        "--max-chunk-phonemes",
        type=int,
        default=None,
        help="most phonemes in a chunk after the first (default: the service's, 96 with preemptible steps, else 200)",
    )
    parser.add_argument(
        "--first-chunk-phonemes", type=int, default=FIRST_CHUNK_PHONEMES, help="most phonemes in a first chunk"
    )
    parser.add_argument(
        "--min-first-chunk-phonemes",
        type=int,
        default=None,
        help="fewest phonemes a first chunk closes at a punctuation cut (default: the service's, 20 CPU, 0 GPU)",
    )
    parser.add_argument(
        "--first-chunk-wait-ms", type=float, default=None, help="batch wait of first chunks (default: --max-wait-ms)"
    )
    parser.add_argument("--bucket-edges", default=None, help="scheduler length buckets, e.g. 16,32,48,64,96,128,200")
    parser.add_argument("--max-queue", type=int, default=4096, help="live requests admitted at once")
    parser.add_argument("--frontend-processes", type=int, default=0, help="text frontend worker processes")
    parser.add_argument("--batches-in-flight", type=int, default=1, help="batches queued to the engines at once")
    parser.add_argument(
        "--saturation-clients", type=int, default=0, help="closed-loop clients for the throughput-under-load phase"
    )
    parser.add_argument(
        "--service-processes",
        type=int,
        default=1,
        help="serve the levels from this many service processes on the device (as `rtvox serve --workers`)",
    )
    parser.add_argument(
        "--gil-switch-ms", type=float, default=0.5, help="the GIL switch interval while serving (0: leave Python's)"
    )
    parser.add_argument(
        "--engine-process",
        action="store_true",
        help="run the engines in a process of their own (ServiceConfig.engine_process = DEVICE:BACKEND)",
    )
    parser.add_argument(
        "--no-preempt",
        action="store_true",
        help="first chunks wait for the step in progress (ServiceConfig.preempt_steps=False)",
    )
    parser.add_argument("--natural-durations", action="store_true", help="do not set realistic target durations")
    parser.add_argument("--url", default=None, help="benchmark a running `rtvox serve` at this URL over HTTP")
    parser.add_argument("--client-processes", type=int, default=1, help="with --url: processes the clients run in")
    parser.add_argument("--api-key", default=None, help="with --url: Bearer key of the server")
    parser.add_argument("--voice", default=None, help="with --url: voice of every request (default: the server's)")
    parser.add_argument(
        "--dump-stacks-after",
        type=float,
        default=None,
        help="seconds: then print every thread's Python stack (this process only) to stderr and exit (a hang's where)",
    )
    args = parser.parse_args()
    if args.dump_stacks_after:
        faulthandler.dump_traceback_later(args.dump_stacks_after, exit=True)
    common = {  # what both benchmarks take alike
        "levels": [int(n) for n in args.levels.split(",")],
        "level_duration_s": args.level_seconds,
        "think_time_s": args.think_seconds,
        "ttfa_p99_target_s": args.ttfa_p99_ms / 1000.0,
        "baseline_requests": args.baseline_requests,
        "realistic_durations": not args.natural_durations,
        "saturation_clients": args.saturation_clients,
        "progress": lambda msg: print(msg, file=sys.stderr, flush=True),
    }
    if args.url:
        from rtvox.errors import InputError
        from rtvox.runtime.httpload import HTTPStreamError, run_http_load

        try:
            result = run_http_load(
                args.url, client_processes=args.client_processes, api_key=args.api_key, voice=args.voice, **common
            )
        except (InputError, HTTPStreamError) as exc:
            sys.exit(f"load_bench: {exc}")
    else:
        config = ServiceConfig(
            max_batch=args.max_batch,
            max_wait_ms=args.max_wait_ms,
            first_chunk_wait_ms=args.first_chunk_wait_ms,
            max_batch_phonemes=args.max_batch_phonemes,
            max_chunk_phonemes=args.max_chunk_phonemes,
            first_chunk_phonemes=args.first_chunk_phonemes,
            min_first_chunk_phonemes=args.min_first_chunk_phonemes,
            max_queue=args.max_queue,
            frontend_processes=args.frontend_processes,
            batches_in_flight=args.batches_in_flight,
            gil_switch_interval_ms=args.gil_switch_ms or None,
            engine_process=f"{args.device}:{args.backend}" if args.engine_process else None,
            preempt_steps=not args.no_preempt,
            bucket_edges=None if args.bucket_edges is None else tuple(int(e) for e in args.bucket_edges.split(",")),
            default_deadline_s=None,
            fallback_device=None,
        )
        result = run_load_bench(
            args.model,
            device=args.device,
            backend=args.backend,
            service_processes=args.service_processes,
            config=config,
            **common,
        )
    json.dump(result.to_dict(), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
