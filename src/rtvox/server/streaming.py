"""From a runtime chunk stream to HTTP bodies: raw audio bytes, SSE events, or one JSON document.

The first chunk is awaited before the response starts, so every error the runtime raises for a bad request
(unknown voice, nothing speakable, busy queue) still becomes a JSON 4xx/429. After that, bytes leave as each
chunk is made; the runtime request is cancelled if the client goes away.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

import numpy as np
from starlette.types import ASGIApp, Receive, Scope, Send

from rtvox.audio.encode import WAV_HEADER_BYTES, StreamEncoder, wav_header
from rtvox.constants import FRAMES_PER_SECOND, SAMPLE_RATE
from rtvox.errors import RtvoxError
from rtvox.runtime.types import AudioChunk, SynthesisRequest
from rtvox.server.errors import error_body, to_api_error
from rtvox.server.metrics import Metrics
from rtvox.server.protocol import SpeechService
from rtvox.server.stretch import time_stretch
from rtvox.server.timestamps import Timeline

log = logging.getLogger("rtvox.server")
WARNINGS_HEADER = "X-Rtvox-Warnings"
# Formats encoded by FFmpeg or libsndfile cost enough per chunk to run off the event loop; wav/pcm do not.
_INLINE_FORMATS = ("wav", "pcm")


@dataclass
class ChunkStream:
    """One request's audio chunks, the first already received; stretched to the requested speed."""

    endpoint: str  # metrics label
    started: float  # perf_counter at request start
    stretch: float  # playback-rate factor applied to each chunk (1.0 = none)
    metrics: Metrics
    _first: AudioChunk | None
    _rest: AsyncIterator[AudioChunk]
    audio_seconds: float = field(default=0.0)

    @classmethod
    async def open(
        cls,
        service: SpeechService,
        request: SynthesisRequest,
        *,
        endpoint: str,
        started: float,
        stretch: float,
        metrics: Metrics,
        deadline_s: float | None,
    ) -> ChunkStream:
        iterator = service.stream(request, deadline_s=deadline_s)
        try:
            first: AudioChunk | None = await anext(iterator)
        except StopAsyncIteration:
            first = None
        except BaseException:
            await _close(iterator)
            raise
        metrics.ttfa.labels(endpoint).observe(time.perf_counter() - started)
        return cls(endpoint, started, stretch, metrics, first, iterator)

    async def chunks(self) -> AsyncGenerator[tuple[AudioChunk, np.ndarray], None]:
        """(runtime chunk, audio to send) pairs; closing this generator cancels the runtime request."""
        try:
            if self._first is not None:
                yield self._first, self._audio(self._first)
            async for chunk in self._rest:
                yield chunk, self._audio(chunk)
            self.metrics.synthesis_seconds.labels(self.endpoint).observe(time.perf_counter() - self.started)
            self.metrics.audio_seconds.labels(self.endpoint).inc(self.audio_seconds)
        finally:
            await _close(self._rest)

    def _audio(self, chunk: AudioChunk) -> np.ndarray:
        audio = chunk.audio if self.stretch == 1.0 else time_stretch(chunk.audio, self.stretch)
        self.audio_seconds += len(audio) / SAMPLE_RATE
        return audio

    async def aclose(self) -> None:
        await _close(self._rest)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the frontend left out of the text (e.g. a script rtvox cannot read), known with the first chunk."""
        return self._first.warnings if self._first is not None else ()

    def headers(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Response headers: `base` plus X-Rtvox-Warnings (a JSON list, ASCII-escaped) when text was left out."""
        out = dict(base or {})
        if self.warnings:
            out[WARNINGS_HEADER] = json.dumps(list(self.warnings), ensure_ascii=True)
        return out


async def _close(iterator: AsyncIterator[AudioChunk]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception as exc:  # cancellation clean-up must never mask the error that caused it
            log.warning("closing a runtime stream failed: %s", exc)


class Encoder:
    """A StreamEncoder that moves the costly codecs off the event loop. A body that ends without `flush` (the
    client went away, the stream failed) calls `release`, which frees the codec at once."""

    def __init__(self, fmt: str) -> None:
        self._encoder = StreamEncoder(fmt, SAMPLE_RATE)
        self._inline = fmt in _INLINE_FORMATS
        self._running: asyncio.Future[bytes] | None = None  # the codec's call on a worker thread, if any

    async def encode(self, audio: np.ndarray) -> bytes:
        if self._inline:
            return self._encoder.encode(audio)
        return await self._off_loop(self._encoder.encode, audio)

    async def flush(self) -> bytes:
        if self._inline:
            return self._encoder.flush()
        return await self._off_loop(self._encoder.flush)

    async def _off_loop(self, fn: Callable[..., bytes], *args: object) -> bytes:
        # shielded: a cancelled request (client gone) stops waiting, but the thread's call runs to its end, and
        # `release` must not free the codec under it
        self._running = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        return await asyncio.shield(self._running)

    def release(self) -> None:
        """Free the codec of a stream that will not be flushed (a no-op after `flush`); if a call of it still
        runs on its thread, once that call returns."""
        running = self._running
        if running is None or running.done():
            self._encoder.abort()
        else:
            running.add_done_callback(self._abort_after)

    def _abort_after(self, running: asyncio.Future[bytes]) -> None:
        if not running.cancelled():
            running.exception()  # nobody awaits it any more: its error (if any) is not news, the client is gone
        self._encoder.abort()


class StreamCut(Exception):
    """A streamed response failed after its first bytes and has been logged; the connection is dropped without
    the chunked body's end, so the client sees an incomplete response (CutStreamMiddleware keeps it out of the
    unhandled-error path)."""


async def audio_body(stream: ChunkStream, fmt: str) -> AsyncIterator[bytes]:
    """Raw file bytes, chunk by chunk; the concatenation is one valid file. A failure after the first bytes can
    only cut the stream short (the status line is gone): the client sees an incomplete chunked body."""
    encoder = Encoder(fmt)
    sent = 0
    try:
        async with aclosing(stream.chunks()) as chunks:
            async for _, audio in chunks:
                data = await encoder.encode(audio)
                if data:
                    sent += len(data)
                    yield data
        tail = await encoder.flush()
    except Exception as exc:
        if isinstance(exc, RtvoxError):  # a deadline, an engine failure: expected, said in one line
            log.warning("a %s stream was cut after %d bytes: %s", fmt, sent, exc)
        else:
            log.exception("a %s stream failed after %d bytes", fmt, sent)
        raise StreamCut(str(exc)) from exc
    finally:  # a client that left (the body closed or cancelled mid-stream) or a failure: free the codec now
        encoder.release()
    if tail:
        yield tail


class CutStreamMiddleware:
    """Ends a response whose stream was cut (StreamCut, already logged) quietly: the server then drops the
    connection, which is how a chunked response says it is incomplete."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except StreamCut:
            return


def sse_event(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def sse_error(exc: Exception) -> bytes:
    """The event that ends an SSE stream that failed after it started (its status was already 200)."""
    error = to_api_error(exc)
    body = error_body(error.message, error.type, error.param, error.code)
    return sse_event({"type": "error", "status": error.status, **body})


async def openai_sse_body(stream: ChunkStream, fmt: str, input_chars: int) -> AsyncIterator[bytes]:
    """OpenAI's speech events: `speech.audio.delta` with base64 audio, then `speech.audio.done` with usage."""
    encoder = Encoder(fmt)
    try:
        async with aclosing(stream.chunks()) as chunks:
            async for _, audio in chunks:
                data = await encoder.encode(audio)
                if data:
                    yield sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
        tail = await encoder.flush()
    except Exception as exc:  # the stream is already 200: say what broke in-band, then end it
        yield sse_error(exc)
        return
    finally:
        encoder.release()
    if tail:
        yield sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(tail).decode()})
    frames = round(stream.audio_seconds * FRAMES_PER_SECOND)
    usage = {"input_tokens": input_chars, "output_tokens": frames, "total_tokens": input_chars + frames}
    yield sse_event({"type": "speech.audio.done", "usage": usage})


async def native_sse_body(stream: ChunkStream, fmt: str, timeline: Timeline | None) -> AsyncIterator[bytes]:
    """Native events: each delta carries its audio and, when asked, the words and phonemes it speaks."""
    encoder = Encoder(fmt)
    try:
        async with aclosing(stream.chunks()) as chunks:
            async for chunk, audio in chunks:
                data = await encoder.encode(audio)
                event: dict[str, object] = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
                event["index"] = chunk.index
                event["text"] = chunk.text
                if timeline is not None:
                    words, phonemes = timeline.add(chunk, len(audio))
                    event["words"] = [w.model_dump() for w in words]
                    event["phonemes"] = [p.model_dump() for p in phonemes]
                yield sse_event(event)
        tail = await encoder.flush()
    except Exception as exc:  # the stream is already 200: say what broke in-band, then end it
        yield sse_error(exc)
        return
    finally:
        encoder.release()
    if tail:
        yield sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(tail).decode()})
    yield sse_event({"type": "speech.audio.done", "duration": round(stream.audio_seconds, 6)})


async def collect(stream: ChunkStream, fmt: str, on_chunk: Callable[[AudioChunk, int], object] | None) -> bytes:
    """The whole file at once (stream_format=json); `on_chunk(chunk, samples_sent)` sees each chunk."""
    encoder = Encoder(fmt)
    parts = []
    try:
        async with aclosing(stream.chunks()) as chunks:
            async for chunk, audio in chunks:
                if on_chunk is not None:
                    on_chunk(chunk, len(audio))
                parts.append(await encoder.encode(audio))
        parts.append(await encoder.flush())
    finally:
        encoder.release()
    data = b"".join(parts)
    if fmt == "wav" and len(data) >= WAV_HEADER_BYTES:  # the whole file is known: real sizes, not streaming ones
        data = wav_header(SAMPLE_RATE, len(data) - WAV_HEADER_BYTES) + data[WAV_HEADER_BYTES:]
    return data
