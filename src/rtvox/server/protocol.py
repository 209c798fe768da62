"""What the server needs from the runtime, as a Protocol, so the HTTP layer can be built and tested apart from it.

`rtvox.runtime.service.TTSService` implements it; unit tests use a small fake.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult


class SpeechService(Protocol):
    """An asynchronous, batching front of a Synthesizer.

    `stream` raises InputError (bad request), QueueFullError (busy: retry later) or a deadline error, either when
    called or on the first iteration; `aclose()` on the iterator cancels the request.
    """

    synthesizer: Synthesizer

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def stream(self, request: SynthesisRequest, *, deadline_s: float | None = None) -> AsyncIterator[AudioChunk]: ...

    async def synthesize(
        self, request: SynthesisRequest, *, deadline_s: float | None = None, internal: bool = False
    ) -> SynthesisResult:
        """The whole utterance; `internal`: work the server does for itself (a clone's calibration renders), served
        like any request but left out of the request metrics (outcomes, TTFA, audio delivered)."""
        ...

    @property
    def ready(self) -> bool: ...

    def health(self) -> dict[str, Any]: ...

    def stats(self) -> dict[str, Any]: ...
