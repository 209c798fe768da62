"""Speaker and emotion embedding cache: in-process LRU first, then (optionally) Redis shared across processes.

Entries are keyed by a namespace naming the encoder (e.g. "speaker:ge2e-v1", "emotion:<model hash>", so two encoders
never share entries) and the sha256 of the raw uploaded audio bytes. Values are float32 arrays; in Redis they are
stored as a small header (magic, version, shape) plus the raw little-endian bytes, and anything that does not decode
to exactly that is treated as a miss.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rtvox.runtime.cache_redis import RedisTier

REDIS_URL_ENV = "RTVOX_REDIS_URL"
DEFAULT_CAPACITY = 1024
REDIS_KEY_PREFIX = "rtvox:emb:"

_MAGIC = b"RTVE"
_FORMAT_VERSION = 1
_MAX_NDIM = 4
_HEADER = struct.Struct("<4sBB")  # magic, format version, ndim; then ndim × uint32 dims, then float32 LE data
_DIM = struct.Struct("<I")
_DTYPE = np.dtype("<f4")


def content_key(data: bytes) -> str:
    """The cache key of an uploaded clip: sha256 of its raw bytes (hex), so identical uploads share an entry."""
    return hashlib.sha256(data).hexdigest()


def encode_embedding(value: np.ndarray) -> bytes:
    """Serialize a float32 array as header + raw little-endian bytes."""
    arr = np.asarray(value, dtype=_DTYPE)
    if not 1 <= arr.ndim <= _MAX_NDIM:
        raise ValueError(f"embeddings must have 1 to {_MAX_NDIM} dimensions, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr)
    dims = b"".join(_DIM.pack(d) for d in arr.shape)
    return _HEADER.pack(_MAGIC, _FORMAT_VERSION, arr.ndim) + dims + arr.tobytes()


def decode_embedding(blob: bytes) -> np.ndarray | None:
    """The array in `blob`, or None if it is not exactly what encode_embedding writes (corrupt, truncated, foreign)."""
    if len(blob) < _HEADER.size:
        return None
    magic, version, ndim = _HEADER.unpack_from(blob)
    if magic != _MAGIC or version != _FORMAT_VERSION or not 1 <= ndim <= _MAX_NDIM:
        return None
    offset = _HEADER.size + ndim * _DIM.size
    if len(blob) < offset:
        return None
    shape = tuple(_DIM.unpack_from(blob, _HEADER.size + i * _DIM.size)[0] for i in range(ndim))
    if len(blob) - offset != int(np.prod(shape)) * _DTYPE.itemsize:
        return None
    return np.frombuffer(blob, dtype=_DTYPE, offset=offset).reshape(shape).astype(np.float32)


def _check_entry(namespace: str, key: str) -> None:
    if not namespace or not key or ":" in key or any(c.isspace() for c in namespace + key):
        raise ValueError(
            f"bad cache entry {namespace!r}/{key!r}: namespace and key must be non-empty without spaces, "
            "and the key must not contain ':' (use content_key(audio_bytes))"
        )


class LRUCache:
    """A bounded, thread-safe map from (namespace, key) to float32 arrays, evicting the least recently used.
    Owns its copies of the arrays: callers can neither change an entry nor be changed by it.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 entry, got {capacity}")
        self.capacity = capacity
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def keys(self) -> list[tuple[str, str]]:
        """Entries from least to most recently used."""
        with self._lock:
            return list(self._data)

    def get(self, namespace: str, key: str) -> np.ndarray | None:
        with self._lock:
            value = self._data.get((namespace, key))
            if value is None:
                return None
            self._data.move_to_end((namespace, key))
        return value.copy()

    def put(self, namespace: str, key: str, value: np.ndarray) -> None:
        stored = np.array(value, dtype=np.float32, copy=True)
        with self._lock:
            self._data[(namespace, key)] = stored
            self._data.move_to_end((namespace, key))
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)


class EmbeddingCache:
    """Two-tier embedding cache: the in-process LRU, then Redis when a URL is given (or $RTVOX_REDIS_URL is set).
    A Redis hit fills the LRU; a put writes both. Redis trouble never raises: the cache keeps working locally and
    reports it in health(). Owns the LRU, the Redis tier and the hit/miss counters; thread-safe.
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        redis_url: str | None = None,
        *,
        ttl_s: float | None = None,
        socket_timeout_s: float | None = None,
        retry_backoff_s: float | None = None,
    ) -> None:
        """`redis_url=None` reads $RTVOX_REDIS_URL; an empty string turns Redis off. `ttl_s` expires Redis entries
        (the LRU is bounded by `capacity` instead); the timeout and backoff default to those of cache_redis.
        """
        self.local = LRUCache(capacity)
        url = os.environ.get(REDIS_URL_ENV, "") if redis_url is None else redis_url
        self.redis: RedisTier | None = None
        if url:
            # Imported here so the redis client is only needed by deployments that configure it.
            from rtvox.runtime import cache_redis

            self.redis = cache_redis.RedisTier(
                url,
                socket_timeout_s=cache_redis.DEFAULT_SOCKET_TIMEOUT_S if socket_timeout_s is None else socket_timeout_s,
                retry_backoff_s=cache_redis.DEFAULT_RETRY_BACKOFF_S if retry_backoff_s is None else retry_backoff_s,
                ttl_s=ttl_s,
            )
        self._counts = {"local_hits": 0, "local_misses": 0, "redis_hits": 0, "redis_misses": 0, "redis_corrupt": 0}
        self._counts_lock = threading.Lock()
        self._inflight: dict[tuple[str, str], tuple[threading.Lock, int]] = {}
        self._inflight_lock = threading.Lock()

    def _count(self, name: str) -> None:
        with self._counts_lock:
            self._counts[name] += 1

    # ------------------------------------------------------------------ lookups
    def get(self, namespace: str, key: str) -> np.ndarray | None:
        """The cached embedding (a fresh float32 array) or None."""
        _check_entry(namespace, key)
        value = self.local.get(namespace, key)
        if value is not None:
            self._count("local_hits")
            return value
        self._count("local_misses")
        if self.redis is None:
            return None
        blob = self.redis.get(REDIS_KEY_PREFIX + namespace + ":" + key)
        if blob is None:
            self._count("redis_misses")
            return None
        value = decode_embedding(blob)
        if value is None:
            self._count("redis_corrupt")
            self._count("redis_misses")
            return None
        self._count("redis_hits")
        self.local.put(namespace, key, value)
        return value

    def put(self, namespace: str, key: str, value: np.ndarray) -> None:
        """Store `value` (converted to float32) in the LRU and, if configured and up, in Redis."""
        _check_entry(namespace, key)
        blob = encode_embedding(value)  # validates the shape before either tier sees it
        self.local.put(namespace, key, value)
        if self.redis is not None:
            self.redis.set(REDIS_KEY_PREFIX + namespace + ":" + key, blob)

    def get_or_compute(self, namespace: str, audio_bytes: bytes, fn: Callable[[], np.ndarray]) -> np.ndarray:
        """The embedding of `audio_bytes` under `namespace`, calling `fn` only on a miss in both tiers.
        Concurrent calls for the same clip wait for one computation instead of each running `fn`.
        """
        key = content_key(audio_bytes)
        entry = (namespace, key)
        with self._inflight_lock:
            lock, users = self._inflight.get(entry, (threading.Lock(), 0))
            self._inflight[entry] = (lock, users + 1)
        try:
            with lock:
                value = self.get(namespace, key)
                if value is None:
                    value = np.asarray(fn(), dtype=np.float32)
                    self.put(namespace, key, value)
                return value
        finally:
            with self._inflight_lock:
                lock, users = self._inflight[entry]
                if users == 1:
                    del self._inflight[entry]
                else:
                    self._inflight[entry] = (lock, users - 1)

    # ------------------------------------------------------------------ reporting
    def health(self) -> dict[str, dict[str, object]]:
        """{"local": {"entries", "capacity"}, "redis": {"configured", "ok", "error", ...}}."""
        redis_health: dict[str, object] = (
            {"configured": False, "ok": False, "error": None} if self.redis is None else self.redis.health()
        )
        return {"local": {"entries": len(self.local), "capacity": self.local.capacity}, "redis": redis_health}

    def stats(self) -> dict[str, dict[str, int]]:
        """Hit/miss counters per tier since start; a corrupt Redis value counts as a miss and in "corrupt"."""
        with self._counts_lock:
            c = dict(self._counts)
        return {
            "local": {"hits": c["local_hits"], "misses": c["local_misses"]},
            "redis": {"hits": c["redis_hits"], "misses": c["redis_misses"], "corrupt": c["redis_corrupt"]},
        }

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()
