"""Unit-test fixtures: the app around a tiny random model and a small in-process fake of TTSService."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rtvox.constants import SAMPLE_RATE
from rtvox.runtime import Synthesizer
from rtvox.runtime.sched_types import QueueFullError
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult
from rtvox.server import ServerConfig, create_app


class FakeService:
    """The SpeechService protocol over a real Synthesizer, one request at a time on a worker thread."""

    def __init__(self, synthesizer: Synthesizer, max_queue: int = 64) -> None:
        self.synthesizer = synthesizer
        self.max_queue = max_queue
        self.live = 0
        self.started = False
        self.requests: list[SynthesisRequest] = []
        self.fail_after_first: BaseException | None = None  # raised after the first chunk, to test mid-stream errors
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    @property
    def ready(self) -> bool:
        return self.started

    def health(self) -> dict[str, Any]:
        return {"ready": self.started}

    def stats(self) -> dict[str, Any]:
        return {"queue_depth": self.live, "running": 0, "batch_size_histogram": {1: 3, 2: 1}}

    def stream(self, request: SynthesisRequest, *, deadline_s: float | None = None) -> AsyncIterator[AudioChunk]:
        if self.live >= self.max_queue:
            raise QueueFullError(1, queued=self.live, limit=self.max_queue)
        self.requests.append(request)
        return self._run(request)

    async def _run(self, request: SynthesisRequest) -> AsyncIterator[AudioChunk]:
        self.live += 1
        try:
            async with self._lock:
                chunks = await asyncio.to_thread(lambda: list(self.synthesizer.stream_request(request)))
            for chunk in chunks:
                yield chunk
                if self.fail_after_first is not None:
                    raise self.fail_after_first
        finally:
            self.live -= 1

    async def synthesize(
        self, request: SynthesisRequest, *, deadline_s: float | None = None, internal: bool = False
    ) -> SynthesisResult:
        chunks = [c async for c in self.stream(request, deadline_s=deadline_s)]
        audio = np.concatenate([c.audio for c in chunks])
        return SynthesisResult(audio=audio, sample_rate=SAMPLE_RATE, chunks=tuple(chunks))


@pytest.fixture(scope="session")
def tiny_model(make_tiny_model: Callable[[str], Path]) -> Path:
    return make_tiny_model("models")


@pytest.fixture
def fake_service(tiny_model: Path) -> FakeService:
    return FakeService(Synthesizer(tiny_model, device="cpu"))


def make_client(service: FakeService, **config: Any) -> TestClient:
    return TestClient(create_app(service, ServerConfig(**config)), raise_server_exceptions=False)


@pytest.fixture
def client(fake_service: FakeService) -> Iterator[TestClient]:
    with make_client(fake_service) as c:
        yield c
