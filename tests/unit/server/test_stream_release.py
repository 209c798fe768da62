"""A streamed body that ends early (client gone, failure) frees its codec at once, never under a running call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import numpy as np
import pytest

from rtvox.audio.encode import StreamEncoder
from rtvox.constants import SAMPLE_RATE
from rtvox.server.streaming import Encoder, audio_body, openai_sse_body


class FakeStream:
    """What the bodies read: (chunk, audio) pairs, here 0.5 s of a tone each, `n` of them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.audio_seconds = 0.0
        self.closed = False

    async def chunks(self) -> AsyncIterator[tuple[object, np.ndarray]]:
        t = np.arange(SAMPLE_RATE // 2) / SAMPLE_RATE
        try:
            for _ in range(self.n):
                self.audio_seconds += 0.5
                yield object(), (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
                await asyncio.sleep(0)
        finally:
            self.closed = True


def test_abort_releases_and_refuses_more() -> None:
    enc = StreamEncoder("mp3", SAMPLE_RATE)
    enc.encode(np.zeros(SAMPLE_RATE, np.float32))
    enc.abort()
    enc.abort()  # twice: nothing more to do
    assert enc.flush() == b""
    with pytest.raises(RuntimeError, match="after flush or abort"):
        enc.encode(np.zeros(10, np.float32))
    done = StreamEncoder("wav", SAMPLE_RATE)
    assert done.encode(np.zeros(100, np.float32))  # wav: header and samples leave at once
    done.flush()
    done.abort()  # after flush: a no-op


@pytest.mark.parametrize("fmt", ["mp3", "wav"])
def test_body_closed_midway_frees_the_codec(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    aborted: list[StreamEncoder] = []
    real_abort = StreamEncoder.abort

    def spy(self: StreamEncoder) -> None:
        if self._encoder is not None:
            aborted.append(self)
        real_abort(self)

    monkeypatch.setattr(StreamEncoder, "abort", spy)

    async def main() -> FakeStream:
        stream = FakeStream(50)
        body = audio_body(stream, fmt)  # type: ignore[arg-type]
        first = await anext(body)
        assert first
        await body.aclose()  # what the server does when the client leaves
        return stream

    stream = asyncio.run(main())
    assert stream.closed  # the runtime stream was closed (its request cancelled) ...
    assert len(aborted) == 1 and aborted[0]._encoder is None  # ... and the codec freed, not left to the GC


def test_a_finished_body_does_not_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real_abort = StreamEncoder.abort
    monkeypatch.setattr(
        StreamEncoder, "abort", lambda self: (calls.append(self._encoder is not None), real_abort(self))
    )

    async def main() -> bytes:
        parts = [part async for part in openai_sse_body(FakeStream(3), "mp3", 10)]  # type: ignore[arg-type]
        return b"".join(parts)

    out = asyncio.run(main())
    assert b"speech.audio.done" in out
    assert calls == [False]  # release after flush: nothing left to free


def test_cancel_during_a_threaded_encode_frees_after_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client leaves while mp3 is being encoded on a worker thread: the codec is freed only once that call
    has returned (freeing it under the call would crash FFmpeg)."""
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    real_encode, real_abort = StreamEncoder.encode, StreamEncoder.abort

    def slow_encode(self: StreamEncoder, chunk: np.ndarray) -> bytes:
        entered.set()
        release.wait(10)
        out = real_encode(self, chunk)
        order.append("encode returned")
        return out

    def abort(self: StreamEncoder) -> None:
        order.append("abort")
        real_abort(self)

    monkeypatch.setattr(StreamEncoder, "encode", slow_encode)
    monkeypatch.setattr(StreamEncoder, "abort", abort)

    async def main() -> None:
        encoder = Encoder("mp3")
        task = asyncio.ensure_future(encoder.encode(np.zeros(SAMPLE_RATE, np.float32)))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        encoder.release()
        assert order == []  # the call is still running: nothing freed yet
        release.set()
        for _ in range(200):
            if order[-1:] == ["abort"]:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert order == ["encode returned", "abort"]
