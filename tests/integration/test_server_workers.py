"""`rtvox serve --workers 2`: two server processes on one port, each with its own engines — both serve, a clone
made through one is used by the other, and /metrics from either worker counts the requests of both."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rtvox.audio import decode_audio
from rtvox.server.metrics import SNAPSHOT_PERIOD_S

from .server_harness import free_port

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def two_workers(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "RTVOX_VOICES_DIR": str(tmp_path_factory.mktemp("voices"))}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "rtvox", "serve", "--workers", "2", "--model", str(tiny_model), "--device", "cpu"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        answers: list[int] = []
        while 200 not in answers[-1:]:  # /ready answers 200 only once every worker is loaded and warm
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                pytest.fail(f"rtvox serve --workers 2 did not get ready (exit {proc.poll()}):\n{out[-3000:]}")
            try:
                answer = httpx.get(f"{url}/ready", timeout=5)
                answers.append(answer.status_code)
                if answer.status_code == 503:  # says how many workers are ready, as an OpenAI-style error
                    assert answer.json()["error"]["code"] == "not_ready", answer.text
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _pids(url: str, tries: int = 200) -> set[int]:
    seen: set[int] = set()
    for _ in range(tries):  # each call on a new connection: the kernel hands it to whichever worker accepts
        seen.add(httpx.get(f"{url}/health", timeout=10).json()["worker"])
        if len(seen) == 2:
            break
    return seen


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_ready_speaks_for_every_worker(two_workers: str) -> None:
    for _ in range(6):  # whichever worker answers, it reports both
        body = httpx.get(f"{two_workers}/ready", timeout=10).json()
        assert body["ready"] is True and body["workers"] == {"ready": 2, "expected": 2}, body


def test_both_workers_serve_share_clones_and_count_together(two_workers: str) -> None:
    url = two_workers
    assert len(_pids(url)) == 2
    files = {"audio_sample": ("ref.wav", (DATA / "speech_en_female_16k.wav").read_bytes(), "audio/wav")}
    voice = httpx.post(f"{url}/v1/audio/voices", data={"name": "Both"}, files=files, timeout=60)
    assert voice.status_code == 200, voice.text
    voice_id = voice.json()["id"]
    served = 12
    for i in range(served):  # new connections: both workers get some, each must know the clone
        body = {"model": "tts-1", "input": f"Hello number {i}.", "voice": voice_id, "response_format": "wav"}
        r = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)
        assert r.status_code == 200, r.text
        wav, _ = decode_audio(r.content)
        assert len(wav) > 0
    listed = httpx.get(f"{url}/v1/audio/voices", timeout=10).json()["data"]
    assert voice_id in {v["id"] for v in listed}
    time.sleep(SNAPSHOT_PERIOD_S + 0.5)  # the other worker's runtime snapshot is at most a period old
    for _ in range(4):  # whichever worker answers, the counts are both workers'
        text = httpx.get(f"{url}/metrics", timeout=10).text
        route = "/v1/audio/speech"
        assert _metric(text, "rtvox_http_requests_total", route=route, status="200") == served
        assert _metric(text, "rtvox_workers") == 2
        assert _metric(text, "rtvox_service_requests_total", outcome="ok") == served
        assert re.search(r'rtvox_device_memory_bytes\{device="cpu",kind="rss"\} \d', text)
