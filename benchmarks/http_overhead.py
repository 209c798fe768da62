"""What the HTTP layer adds over the engine, per request (P50/P90/P99), on this machine's CPU.

Two measurements, each a server in its own process (uvicorn, loopback) and a keep-alive client here:
  stub   the runtime replaced by a stub that returns a precomputed 0.5 s chunk at once: the HTTP latency is then
         all overhead (routing, validation, voice lookup, encoding, metrics, loopback), measured against the
         stub called directly in process;
  real   the real TTSService on a tiny random model: HTTP latency minus direct TTSService latency for the same
         request (noisier: the difference of two distributions).

    .venv/bin/python benchmarks/http_overhead.py [--requests 2000] [--real-requests 200] [--format pcm]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

TEXT = "Hello world, 你好。"
CHUNK_SECONDS = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tiny_model(root: Path) -> Path:
    from rtvox.models.bundle import make_random_bundle
    from rtvox.text import Vocabulary

    path = root / "tiny"
    if not (path / "config.json").exists():
        voices = {"anna": {"gender": "female"}, "ben": {"gender": "male"}}
        make_random_bundle(path, preset="tiny", vocab=Vocabulary.default().to_dict(), seed=0, voices=voices)
    return path


class StubService:
    """The SpeechService protocol with no engine: every request gets one precomputed chunk immediately."""

    def __init__(self, synthesizer: Any) -> None:
        from rtvox.constants import SAMPLE_RATE
        from rtvox.runtime.types import AudioChunk

        self.synthesizer = synthesizer
        audio = (0.1 * np.sin(np.arange(int(CHUNK_SECONDS * SAMPLE_RATE)) * 0.05)).astype(np.float32)
        self._chunk = AudioChunk(0, audio, TEXT, True)

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def ready(self) -> bool:
        return True

    def health(self) -> dict[str, Any]:
        return {}

    def stats(self) -> dict[str, Any]:
        return {"queue_depth": 0}

    async def _one(self) -> AsyncIterator[Any]:
        yield self._chunk

    def stream(self, request: Any, *, deadline_s: float | None = None) -> AsyncIterator[Any]:
        return self._one()

    async def synthesize(self, request: Any, *, deadline_s: float | None = None) -> Any:
        raise NotImplementedError


def build_service(kind: str, model: Path) -> Any:
    from rtvox.runtime import Synthesizer
    from rtvox.runtime.service import ServiceConfig, TTSService

    synth = Synthesizer(model, device="cpu", voices_dir=model.parent / "voices")
    if kind == "stub":
        return StubService(synth)
    return TTSService(synth, ServiceConfig(fallback_device=None))


def serve(kind: str, model: Path, port: int) -> None:
    import uvicorn

    from rtvox.server import ServerConfig, create_app

    app = create_app(build_service(kind, model), ServerConfig())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000
    return {f"p{q}": float(np.percentile(ms, q)) for q in (50, 90, 99)}


def http_latencies(port: int, body: bytes, n: int, warmup: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    out = []
    for i in range(warmup + n):
        start = time.perf_counter()
        conn.request("POST", "/v1/audio/speech", body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - start
        assert response.status == 200 and data, (response.status, data[:200])
        if i >= warmup:
            out.append(elapsed)
    conn.close()
    return out


def direct_latencies(kind: str, model: Path, fmt: str, n: int, warmup: int) -> list[float]:
    """The same request straight to the service in process: engine (or stub) plus encoding, no HTTP."""
    from rtvox.audio.encode import StreamEncoder
    from rtvox.constants import SAMPLE_RATE
    from rtvox.runtime.types import SynthesisRequest

    service = build_service(kind, model)
    voice = service.synthesizer.voices.builtin_names[0]

    async def main() -> list[float]:
        await service.start()
        out = []
        try:
            for i in range(warmup + n):
                start = time.perf_counter()
                encoder = StreamEncoder(fmt, SAMPLE_RATE)
                parts = [encoder.encode(c.audio) async for c in service.stream(SynthesisRequest(TEXT, voice=voice))]
                parts.append(encoder.flush())
                elapsed = time.perf_counter() - start
                if i >= warmup:
                    out.append(elapsed)
        finally:
            await service.stop()
        return out

    return asyncio.run(main())


def wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the benchmark server exited during start-up")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/ready")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the benchmark server did not become ready")


def measure(kind: str, model: Path, fmt: str, n: int, warmup: int) -> dict[str, Any]:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", kind, "--model", str(model), "--port", str(port)]
    proc = subprocess.Popen(cmd)
    try:
        wait_ready(port, proc)
        body = json.dumps({"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": fmt}).encode()
        over_http = http_latencies(port, body, n, warmup)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    direct = direct_latencies(kind, model, fmt, n, warmup)
    http_p, direct_p = percentiles(over_http), percentiles(direct)
    return {
        "kind": kind,
        "format": fmt,
        "requests": n,
        "http_ms": http_p,
        "direct_ms": direct_p,
        "overhead_p50_ms": http_p["p50"] - direct_p["p50"],
        "http_mean_ms": statistics.fmean(over_http) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="timed requests against the stub")
    parser.add_argument("--real-requests", type=int, default=200, help="timed requests against the real service")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--format", default="pcm")
    parser.add_argument("--kinds", default="stub,real")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--serve", choices=["stub", "real"], help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.model, args.port)
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RTVOX_VOICES_DIR"] = str(Path(tmp) / "voices")
        model = tiny_model(Path(tmp))
        counts = {"stub": args.requests, "real": args.real_requests}
        results = [measure(k, model, args.format, counts[k], args.warmup) for k in args.kinds.split(",")]
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    for r in results:
        h, d = r["http_ms"], r["direct_ms"]
        print(
            f"{r['kind']:>4} {r['format']}: HTTP p50 {h['p50']:.2f} p90 {h['p90']:.2f} p99 {h['p99']:.2f} ms | "
            f"direct p50 {d['p50']:.2f} ms | overhead p50 {r['overhead_p50_ms']:.2f} ms ({r['requests']} requests)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
