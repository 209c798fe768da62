"""Voices as the API sees them: built-ins, OpenAI's voice names mapped onto built-ins, and clones.

Clones are kept by the runtime's VoiceStore (one atomically written file each, so they survive restarts). With a
Redis URL the clone table is also shared: a clone made on one server is found by the others on first use. Redis is
never needed by a request: while it is away the table is skipped (one probe per backoff, as the embedding tier's),
and once it answers again what this process could not share (clones made, deletes done) is caught up; if the table
is gone (a Redis restarted empty) every local clone is published again.

Deletes are remembered on disk (`<clones dir>/.deleted/<id>`, kept DELETED_KEEP_S) by the server that made them, so a
Redis that comes back empty cannot bring a deleted clone back: each catch-up sends its own deletes again, and a
server that still holds a copy drops it instead of publishing it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import redis

from rtvox.errors import AudioInputError, InputError, RtvoxError, VoiceNotFoundError
from rtvox.runtime.cache_redis import DEFAULT_RETRY_BACKOFF_S, RedisState, redact_url
from rtvox.runtime.synthesizer import Synthesizer
from rtvox.runtime.types import SynthesisRequest, SynthesisResult, Voice
from rtvox.runtime.voices import CLONE_SUFFIX, OPENAI_VOICES, clone_from_payload, clone_payload, validate_voice_name
from rtvox.server.schemas import VoiceObject

log = logging.getLogger("rtvox.server")

CLONE_ID_PREFIX = "voice_"
REDIS_VOICES_KEY = "rtvox:voices"
# Deleted clone ids (a sorted set scored by the deletion's wall time): a server that adopted or made a clone
# drops its local copy when another server deletes it. Entries older than DELETED_KEEP_S are trimmed at each
# delete; a server that has not reached Redis for that long may keep serving such a clone.
REDIS_DELETED_KEY = "rtvox:voices:deleted"
DELETED_KEEP_S = 30 * 86400.0
DELETE_SYNC_S = 1.0  # a request for a local clone checks for deletes elsewhere at most this often (in background)
DELETE_SYNC_SLACK_S = 300.0  # re-read tombstones this far before the newest seen: servers' clocks differ
DELETED_DIR = ".deleted"  # under the clones folder: one empty file per clone this server deleted, named by its id
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


def remember_delete(clones_dir: Path, name: str) -> None:
    """A durable note that `name` was deleted here (an empty file; its mtime is the deletion time), which every
    Redis catch-up of a server on this clones folder sends again (VoiceRegistry._catch_up)."""
    try:
        folder = Path(clones_dir) / DELETED_DIR
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()
    except OSError as exc:  # a read-only clones folder: the delete stands, it just is not sent again
        log.warning("could not record the delete of %s for Redis catch-ups: %s", name, exc)


def queue_delete(pipe: Any, ids: Sequence[str], now: float, *, keep_older: bool = False) -> None:
    """Queue on a Redis pipeline (redis-py's or its asyncio one) what deleting clones from the shared table takes,
    the one recipe of the API's delete, a server's catch-up and `rtvox voices rm`: the entries (HDEL, the first
    reply: how many Redis had), tombstones scored `now` from which the servers holding a copy drop theirs
    (`keep_older`: ZADD NX, a tombstone already there keeps its score, for deletes sent again) and the trim of
    tombstones older than DELETED_KEEP_S."""
    pipe.hdel(REDIS_VOICES_KEY, *ids)
    pipe.zadd(REDIS_DELETED_KEY, dict.fromkeys(ids, now), nx=keep_older)
    pipe.zremrangebyscore(REDIS_DELETED_KEY, "-inf", now - DELETED_KEEP_S)


def delete_shared(redis_url: str, voice_id: str) -> bool:
    """Delete a clone from the Redis-shared table as `DELETE /v1/audio/voices/{id}` does (the entry, and a
    tombstone from which the servers holding a copy drop it), for callers without a server (`rtvox voices rm`).
    Returns whether Redis had the entry; raises RtvoxError when Redis does not answer."""
    client = redis.Redis.from_url(redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
    try:
        with client.pipeline(transaction=False) as pipe:
            queue_delete(pipe, [voice_id], time.time())
            shared = pipe.execute()[0]
    except (redis.exceptions.RedisError, OSError) as exc:
        raise RtvoxError(f"Redis at {redact_url(redis_url)} did not answer ({type(exc).__name__}: {exc})") from None
    finally:
        client.close()
    return bool(shared)


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
        self._builtins_folded = {name.lower(): name for name in self.store.builtin_names}
        self._worker: ThreadPoolExecutor | None = None  # made on first use, so a restarted app gets a new one
        self._redis: Any = None
        self._own_state: RedisState | None = None
        self._synced_outages = -1  # the RedisState outage count last caught up with (-1: never reached Redis)
        self._unshared: set[str] = set()  # clones made while the table could not be written
        self._catching_up: asyncio.Task[Any] | None = None
        self._deletes_synced_at = -float("inf")  # time.monotonic() of the last read of the deleted ids
        self._deletes_seen_until = -float("inf")  # newest deletion time read so far (the next read starts before it)
        self._syncing_deletes: asyncio.Task[Any] | None = None
        if redis_url:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            self._redis = aioredis.from_url(
                redis_url,
                socket_timeout=REDIS_TIMEOUT_S,
                socket_connect_timeout=REDIS_TIMEOUT_S,
                retry=Retry(NoBackoff(), 0),  # one failure means "down"; the state's backoff decides the next try
            )
            self._own_state = RedisState(redact_url(redis_url), DEFAULT_RETRY_BACKOFF_S)

    async def close(self) -> None:
        for task in (self._catching_up, self._syncing_deletes):
            if task is not None:
                task.cancel()
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
        builtin = self._builtin_named(name)
        if builtin is not None:  # never a clone: no clone may take a built-in's or an OpenAI name, in any case
            return builtin
        is_id = True  # only a name of the id form may reach the store's files or Redis; labels are looked up
        try:  # in memory, so a clone uploaded as "日本語の声" or "a b" is usable by that name too
            validate_voice_name(name)
        except InputError:
            is_id = False
        if is_id and self._known(name):
            self._catch_up_soon()
            self._sync_deletes_soon()  # a delete elsewhere drops it for the requests after this one
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

    def _builtin_named(self, name: str) -> str | None:
        """The built-in voice `name` names in any case (as OpenAI's names are), or an OpenAI name's built-in (a
        built-in's own name wins over an alias); None for anything else."""
        folded = name.strip().lower()
        return self._builtins_folded.get(folded) or self.aliases.get(folded)

    def _known(self, name: str) -> bool:
        return self.store.has(name)

    async def list(self) -> list[VoiceObject]:
        await self._sync_deletes()
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
        builtin = self._builtin_named(voice_id)  # before the id check: "Mei" or "alloy" are voices, not bad ids
        if builtin is not None:
            named = repr(voice_id) if builtin == voice_id else f"{voice_id!r} (the built-in voice {builtin!r})"
            raise InputError(f"{named} is a built-in voice and cannot be deleted", param="voice_id")
        validate_voice_name(voice_id)
        # the entry, and a tombstone so servers that hold a copy drop it too; None: Redis is not there
        replies = await self._redis_pipeline(lambda pipe: queue_delete(pipe, [voice_id], time.time()))
        shared = replies[0] if replies is not None else None
        if self._known(voice_id):
            self.store.remove(voice_id)
            self._unshared.discard(voice_id)
        elif not shared:
            raise VoiceNotFoundError(f"no cloned voice with id {voice_id!r}", param="voice_id")
        if self._redis is not None:  # Redis away or emptied later: the catch-up sends this delete (again)
            remember_delete(self.store.clones_dir, voice_id)

    # ------------------------------------------------------------------ Redis sharing
    def _state(self) -> RedisState:
        """The embedding tier's state when the service has one (one view of Redis per process: what either meets,
        /health reports and both skip), else this registry's own."""
        tier = self.synth.embedding_cache.redis
        if tier is not None:
            return tier.state
        assert self._own_state is not None
        return self._own_state

    async def _redis_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One command on the voice table; None without Redis, while it is down, or on any Redis error (which
        marks it down: a table that answers with errors, e.g. a wrong password or db, is as good as away)."""
        return await self._redis_run(lambda client: getattr(client, method)(*args, **kwargs))

    async def _redis_pipeline(self, queue: Callable[[Any], None]) -> Sequence[Any] | None:
        """The commands `queue` puts on a pipeline, sent at once; their replies, or None as `_redis_call`."""

        async def run(client: Any) -> Any:
            async with client.pipeline(transaction=False) as pipe:
                queue(pipe)
                return await pipe.execute()

        result: Sequence[Any] | None = await self._redis_run(run)
        return result

    async def _redis_run(self, command: Callable[[Any], Awaitable[Any]]) -> Any:
        """`command(client)` awaited under the Redis state's rules (`_redis_call`)."""
        if self._redis is None:
            return None
        state = self._state()
        if not state.claim():
            return None
        try:
            if state.outages != self._synced_outages:  # first, so a lookup cannot adopt a voice deleted meanwhile
                await self._catch_up(state.outages)
            result = await command(self._redis)
        except (redis.exceptions.RedisError, OSError) as exc:  # OSError: TimeoutError, refused sockets
            state.failed(exc)
            return None
        state.succeeded()
        return result

    def _catch_up_soon(self) -> None:
        """If this process has not caught up with Redis since its last outage (or ever), do it in the background:
        a request for a local clone needs no Redis, so it neither waits for this nor pays a timeout."""
        if self._redis is None or self._state().outages == self._synced_outages:
            return
        if self._catching_up is None or self._catching_up.done():
            self._catching_up = asyncio.get_running_loop().create_task(self._redis_call("exists", REDIS_VOICES_KEY))

    async def _catch_up(self, outages: int) -> None:
        """After this process first reaches Redis, or reaches it again after an outage: share what it could not.

        Its own remembered deletes go first (HDEL, and a tombstone where Redis has none: ZADD NX, scored now so
        peers that read past the old score still see it); then every tombstone in Redis drops the local copy it
        names, and only clones no one deleted are published. HSETNX never overwrites an entry another server
        wrote meanwhile."""
        self._synced_outages = outages
        pending, self._unshared = self._unshared, set()
        try:
            deleted = self._remembered_deletes()
            if deleted:
                async with self._redis.pipeline(transaction=False) as pipe:
                    queue_delete(pipe, deleted, time.time(), keep_older=True)
                    await pipe.execute()
            tombstones = {_text(k) for k in await self._redis.zrange(REDIS_DELETED_KEY, 0, -1)}
            local = [v for v in self.store.list() if not v.builtin]  # the store read once (files on disk)
            dropped = self._drop_local(tombstones, {v.name for v in local})
            if not await self._redis.exists(REDIS_VOICES_KEY):  # new or emptied Redis: publish every local clone
                pending = {v.name for v in local}
            clones = [v for v in local if v.name in pending and v.name not in tombstones]
            if clones:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for voice in clones:
                        pipe.hsetnx(REDIS_VOICES_KEY, voice.name, json.dumps(clone_payload(voice)))
                    await pipe.execute()
        except BaseException:
            self._synced_outages = -1  # try again on the next call that reaches Redis
            self._unshared |= pending
            raise
        if clones or deleted or dropped:
            log.info(
                "caught up with Redis: shared %d clone(s) and %d delete(s), dropped %d deleted elsewhere",
                len(clones),
                len(deleted),
                len(dropped),
            )

    def _remembered_deletes(self) -> tuple[str, ...]:
        """The clone ids this server (or a worker sharing its clones folder) deleted within DELETED_KEEP_S;
        older notes are removed."""
        folder = Path(self.store.clones_dir) / DELETED_DIR
        if not folder.is_dir():
            return ()
        horizon = time.time() - DELETED_KEEP_S
        names = []
        for path in folder.iterdir():
            try:
                if path.stat().st_mtime < horizon:
                    path.unlink(missing_ok=True)
                    continue
                validate_voice_name(path.name)
            except (OSError, InputError):  # gone meanwhile, or not a note of ours
                continue
            names.append(path.name)
        return tuple(sorted(names))

    def _drop_local(self, names: set[str], local: set[str]) -> tuple[str, ...]:
        """Remove the local copies of clones deleted elsewhere; returns the ids dropped."""
        dropped = []
        for name in sorted(names & local):
            try:
                self.store.remove(name)
            except VoiceNotFoundError:  # a peer sharing the clones folder removed the file first
                continue
            dropped.append(name)
        return tuple(dropped)

    def _sync_deletes_soon(self) -> None:
        """Read the clones other servers deleted, in the background and at most every DELETE_SYNC_S: a request
        for a local clone never waits on Redis for it (so a delete elsewhere reaches this server within about
        that time, or at its next voice list, which reads them first)."""
        if self._redis is None or time.monotonic() - self._deletes_synced_at < DELETE_SYNC_S:
            return
        if self._syncing_deletes is None or self._syncing_deletes.done():
            self._syncing_deletes = asyncio.get_running_loop().create_task(self._sync_deletes())

    async def _sync_deletes(self) -> None:
        """Drop local clones another server deleted (the ids added to REDIS_DELETED_KEY since the last read)."""
        if self._redis is None:
            return
        self._deletes_synced_at = time.monotonic()
        since = self._deletes_seen_until - DELETE_SYNC_SLACK_S
        rows = await self._redis_call("zrangebyscore", REDIS_DELETED_KEY, since, "+inf", withscores=True)
        if not rows:
            return
        local = {v.name for v in self.store.list() if not v.builtin}  # the clones folder read once
        for _, score in rows:
            self._deletes_seen_until = max(self._deletes_seen_until, float(score))
        dropped = self._drop_local({_text(key) for key, _ in rows}, local)
        if dropped:
            log.info("dropped %d clone(s) deleted by another server: %s", len(dropped), ", ".join(dropped))

    async def _share(self, voice: Voice) -> None:
        payload = json.dumps(clone_payload(voice))
        if await self._redis_call("hset", REDIS_VOICES_KEY, voice.name, payload) is None and self._redis is not None:
            self._unshared.add(voice.name)

    async def _fetch_shared(self, name: str) -> bool:
        blob = await self._redis_call("hget", REDIS_VOICES_KEY, name)
        return blob is not None and self._adopt(blob)

    async def _sync_shared(self) -> None:
        table = await self._redis_call("hgetall", REDIS_VOICES_KEY)
        for key, blob in (table or {}).items():
            name = _text(key)
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


def _text(key: bytes | str) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)
