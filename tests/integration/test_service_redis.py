"""TTSService with the shared Redis embedding tier against a real redis-server: sharing, and going on without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from rtvox.runtime import Synthesizer
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.types import SynthesisRequest

from .test_cache import RedisServer, needs_server, redis_server  # noqa: F401  (fixture)


def _clip(freq: float) -> np.ndarray:
    t = np.arange(24_000 * 3) / 24_000
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@needs_server
def test_services_share_emotion_embeddings_and_survive_redis_going_down(
    tiny_model: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    async def main() -> None:
        config = ServiceConfig(redis_url=redis_server.url, fallback_device=None)
        a = TTSService(Synthesizer(tiny_model, device="cpu"), config)
        b = TTSService(Synthesizer(tiny_model, device="cpu"), config)
        await a.start()
        await b.start()
        assert a.health()["cache"]["status"] == "redis-up" and a.health()["status"] == "ok"
        request = SynthesisRequest(text="你好，世界。", emotion_ref=_clip(220.0))
        first = await a.synthesize(request)
        assert a.stats()["cache"]["redis"]["misses"] == 1
        second = await b.synthesize(request)  # another process: its LRU is empty, Redis has the entry
        assert b.stats()["cache"]["redis"] == {"hits": 1, "misses": 0, "corrupt": 0}
        np.testing.assert_array_equal(first.audio, second.audio)

        redis_server.stop()
        third = await b.synthesize(SynthesisRequest(text="你好，世界。", emotion_ref=_clip(330.0)))
        assert third.seconds > 0  # served from a local computation
        health = b.health()
        assert health["cache"]["status"] == "redis-down" and health["status"] == "degraded"
        assert health["cache"]["redis"]["error"]
        again = await b.synthesize(request)  # the LRU still holds what it had
        np.testing.assert_array_equal(again.audio, first.audio)
        assert b.stats()["requests"]["ok"] == 3
        await a.stop()
        await b.stop()

    asyncio.run(main())
