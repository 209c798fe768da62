"""Voices as the API sees them: built-ins, OpenAI's voice names mapped onto built-ins, and clones.

Clones are kept by the runtime's VoiceStore (one atomically written file each, so they survive restarts). With a
Redis URL the clone table is also shared: a clone made on one server is found by the others on first use.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from rtvox.errors import AudioInputError, InputError, VoiceNotFoundError
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest, SynthesisResult, Voice
from rtvox.runtime.voices import CLONE_SUFFIX, OPENAI_VOICES, clone_from_payload, clone_payload, validate_voice_name
from rtvox.server.schemas import VoiceObject

log = logging.getLogger("rtvox.server")

CLONE_ID_PREFIX = "voice_"
REDIS_VOICES_KEY = "rtvox:voices"
REDIS_TIMEOUT_S = 0.5


def map_openai_voices(builtins: list[Voice]) -> dict[str, str]:
    """OpenAI voice name → built-in name: the same gender where the model has one, spread round-robin."""
    assert builtins, "a model always has at least one built-in voice"
    by_gender: dict[str, list[str]] = {}
    for voice in builtins:
        by_gender.setdefault(voice.gender, []).append(voice.name)
    everyone = [v.name for v in builtins]
    used: dict[str, int] = {}
    mapping = {}
    for name, gender in OPENAI_VOICES:
        pool = by_gender.get(gender) or everyone
        k = used.get(gender, 0)
        used[gender] = k + 1
        mapping[name] = pool[k % len(pool)]
    return mapping


def new_clone_id() -> str:
    return CLONE_ID_PREFIX + secrets.token_hex(8)


class VoiceRegistry:
    """Owns voice resolution for requests and the clone life cycle (embed → store → share).

    Embedding runs on one worker thread so uploads never block the event loop or each other's model state. A
    clone's timbre (rtvox.runtime.timbre) needs the model to speak a few calibration sentences with its embedding:
    they go through `render` (the service's queue, beside every other request), never onto the engines directly.
    """

    def __init__(
        self,
        synthesizer: Synthesizer,
        *,
        redis_url: str | None = None,
        render: Callable[[SynthesisRequest], Awaitable[SynthesisResult]] | None = None,
    ) -> None:
        self.synth = synthesizer
        self.render = render
        self.store = synthesizer.voices
        self.aliases = map_openai_voices([v for v in self.store.list() if v.builtin])
        self._worker: ThreadPoolExecutor | None = None  # made on first use, so a restarted app gets a new one
        self._redis: Any = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(
                redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
            )

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None
        if self._redis is not None:
            await self._redis.aclose()

    # ------------------------------------------------------------------ lookups
    async def resolve(self, requested: str | None) -> str:
        """The store name to synthesize with: a built-in, an OpenAI alias's built-in, or a (shared) clone."""
        if requested is None:
            return self.synth.default_voice
        name = requested.strip()
        if name.lower() in self.aliases and name not in self.store.builtin_names:  # never a clone of that name
            return self.aliases[name.lower()]
        is_id = True  # only a name of the id form may reach the store's files or Redis; labels are looked up
        try:  # in memory, so a clone uploaded as "日本語の声" or "a b" is usable by that name too
            validate_voice_name(name)
        except InputError:
            is_id = False
        if is_id and self._known(name):
            return name
        if is_id and await self._fetch_shared(name):
            return name
        if self.store.labelled(name):  # the name given at upload, as the voice list shows it
            return self.store.get(name).name  # the one clone of that label (several: an error naming their ids)
        builtins = ", ".join(self.store.builtin_names)
        raise VoiceNotFoundError(
            f"unknown voice {name!r}; use a built-in ({builtins}), an OpenAI voice name "
            f"({', '.join(self.aliases)}) or a voice id from GET /v1/audio/voices",
            param="voice",
        )

    def _known(self, name: str) -> bool:
        return self.store.has(name)

    async def list(self) -> list[VoiceObject]:
        await self._sync_shared()
        return [self.describe(v) for v in self.store.list()]

    def describe(self, voice: Voice) -> VoiceObject:
        return VoiceObject(
            id=voice.name,
            name=voice.description if not voice.builtin and voice.description else voice.name,
            type="builtin" if voice.builtin else "audio_sample",
            created_at=self._created_at(voice),
            gender=voice.gender,
            language=voice.language,
            description="" if not voice.builtin else voice.description,
        )

    def _created_at(self, voice: Voice) -> int:
        path = self.synth.model_dir if voice.builtin else self.store.clones_dir / f"{voice.name}{CLONE_SUFFIX}"
        try:
            return int(Path(path).stat().st_mtime)
        except OSError:
            return 0

    # ------------------------------------------------------------------ clones
    async def embed(self, clip: bytes, *, param: str) -> np.ndarray:
        """GE2E embedding of an uploaded clip (decoded, checked for 3–30 s of speech, cached by its hash);
        a bad clip raises AudioInputError naming the request field `param`."""
        try:
            embedding: np.ndarray = await self._in_worker(self.synth.embed_speaker, clip, param=param)
            return embedding
        except AudioInputError as exc:
            raise AudioInputError(str(exc), param=param) from None

    async def _in_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rtvox-voices")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(fn, *args, **kwargs))

    async def spectrum(self, clip: bytes, *, param: str) -> np.ndarray:
        """The clip's speech spectrum (cached by its hash), for timbre matching."""
        try:
            result: np.ndarray = await self._in_worker(self.synth.reference_spectrum, clip, param=param)
        except AudioInputError as exc:
            raise AudioInputError(str(exc), param=param) from None
        return result

    async def profile(self, clip: bytes, *, param: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(embedding, timbre offset or None) of a speaker reference clip sent with a request."""
        embedding = await self.embed(clip, param=param)
        if self.synth.timbre_strength <= 0.0:  # nothing to match: skip the spectrum too
            return embedding, None
        return embedding, await self.timbre(embedding, await self.spectrum(clip, param=param))

    async def timbre(self, embedding: np.ndarray, spectrum: np.ndarray | None) -> np.ndarray | None:
        """The model's timbre offset for a clone (None: no spectrum, or the model does no timbre matching); the
        first use renders the calibration sentences through `render`, later ones are remembered."""
        if spectrum is None or self.synth.timbre_strength <= 0.0:
            return None
        key = self.synth.timbre_key(embedding, spectrum)
        cached = self.synth.cached_timbre(key)
        if cached is not None:
            return cached
        requests = self.synth.calibration_requests(embedding)
        if self.render is not None:
            results = await asyncio.gather(*(self.render(r) for r in requests))
            renders = [r.audio for r in results]
            timbre = await self._in_worker(self.synth.timbre_from_renders, spectrum, renders)
        else:  # no service (a bare registry): the synthesizer speaks them itself, on the worker thread
            timbre = await self._in_worker(self.synth.speaker_timbre, embedding, spectrum)
        return self.synth.remember_timbre(key, timbre)

    async def voice_timbre(self, name: str) -> np.ndarray | None:
        """The timbre offset of a resolved voice name: a clone's, else None."""
        voice = self.store.get(name)
        return None if voice.builtin else await self.timbre(voice.embedding, voice.spectrum)

    async def clone(self, label: str, clip: bytes) -> VoiceObject:
        self.store.refuse_reserved(label)
        embedding = await self.embed(clip, param="audio_sample")
        spectrum = await self.spectrum(clip, param="audio_sample")
        voice = Voice(name=new_clone_id(), embedding=embedding, description=label, builtin=False, spectrum=spectrum)
        stored = self.store.add(voice)
        await self._share(stored)
        try:  # so the clone's first request does not wait for its calibration
            await self.timbre(stored.embedding, stored.spectrum)
        except Exception as exc:  # busy or failing engines: the first request measures it instead
            log.warning("timbre of clone %s not measured yet (%s: %s)", stored.name, type(exc).__name__, exc)
        return self.describe(stored)

    async def delete(self, voice_id: str) -> None:
        validate_voice_name(voice_id)
        if voice_id in self.store.builtin_names:
            raise InputError(f"{voice_id!r} is a built-in voice and cannot be deleted", param="voice_id")
        shared = await self._redis_call("hdel", REDIS_VOICES_KEY, voice_id)
        if self._known(voice_id):
            self.store.remove(voice_id)
        elif not shared:
            raise VoiceNotFoundError(f"no cloned voice with id {voice_id!r}", param="voice_id")

    # ------------------------------------------------------------------ Redis sharing
    async def _redis_call(self, method: str, *args: Any) -> Any:
        if self._redis is None:
            return None
        try:
            return await getattr(self._redis, method)(*args)
        except Exception as exc:  # redis raises many types (connection, timeout, protocol): all mean "carry on"
            log.warning("redis voice table unavailable (%s: %s); using local voices only", type(exc).__name__, exc)
            return None

    async def _share(self, voice: Voice) -> None:
        await self._redis_call("hset", REDIS_VOICES_KEY, voice.name, json.dumps(clone_payload(voice)))

    async def _fetch_shared(self, name: str) -> bool:
        blob = await self._redis_call("hget", REDIS_VOICES_KEY, name)
        return blob is not None and self._adopt(blob)

    async def _sync_shared(self) -> None:
        table = await self._redis_call("hgetall", REDIS_VOICES_KEY)
        for key, blob in (table or {}).items():
            name = key.decode() if isinstance(key, bytes) else str(key)
            if not self._known(name):
                self._adopt(blob)

    def _adopt(self, blob: bytes | str) -> bool:
        """Store a clone found in Redis locally; a malformed entry is skipped with a warning."""
        try:
            self.store.add(clone_from_payload(json.loads(blob)))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping a malformed shared voice entry: %s", exc)
            return False
        return True
