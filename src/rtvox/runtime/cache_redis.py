"""The optional shared tier of the embedding cache: Redis, used only while it answers quickly.

Redis here is an accelerator, never a dependency of a request: every call has a short socket timeout, a failure
marks the tier down for a backoff period (requests skip it meanwhile), one warning is logged per outage, and the
first call after the backoff probes it again so a Redis that comes back is used again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# A hung Redis must not stall synthesis: an embedding recompute costs tens of ms, so waiting longer is pointless.
DEFAULT_SOCKET_TIMEOUT_S = 0.2
DEFAULT_RETRY_BACKOFF_S = 5.0

# Connection-level failures mark the tier down; other Redis errors (e.g. a key of the wrong type) are one-off misses.
_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def redact_url(url: str) -> str:
    """The URL without its password, for logs and health reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class RedisTier:
    """A Redis connection that degrades instead of failing. Owns the client, the up/down state and the backoff
    clock; knows nothing about embeddings (values are opaque bytes). Thread-safe: the client pools connections
    and the state is guarded by a lock.
    """

    def __init__(
        self,
        url: str,
        *,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if socket_timeout_s <= 0 or retry_backoff_s < 0:
            raise ValueError("socket_timeout_s must be > 0 and retry_backoff_s >= 0")
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be a positive number of seconds or None, got {ttl_s}")
        self.url = redact_url(url)
        self.retry_backoff_s = retry_backoff_s
        self._ttl_ms = None if ttl_s is None else max(1, round(ttl_s * 1000))
        self._clock = clock
        # No client-side retries: one failed call means "down", and the backoff decides when to try again.
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._lock = threading.Lock()
        self._ok = True
        self._error: str | None = None
        self._retry_at = 0.0
        # Probe at start so a misconfigured URL shows up in the log and in health() before the first request.
        self.ping()

    # ------------------------------------------------------------------ state
    def _claim(self) -> bool:
        """Whether this call may use Redis now; while down, exactly one caller per backoff period gets to probe."""
        with self._lock:
            if self._ok:
                return True
            now = self._clock()
            if now < self._retry_at:
                return False
            self._retry_at = now + self.retry_backoff_s
            return True

    def _succeeded(self) -> None:
        with self._lock:
            if not self._ok:
                logger.warning("Redis embedding cache at %s is reachable again; using it", self.url)
            self._ok, self._error = True, None

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            first = self._ok
            self._ok, self._error = False, f"{type(exc).__name__}: {exc}"
            self._retry_at = self._clock() + self.retry_backoff_s
        if first:  # one warning per outage, not one per request
            logger.warning(
                "Redis embedding cache at %s is unreachable (%s); using the in-process cache only, retrying every %g s",
                self.url,
                self._error,
                self.retry_backoff_s,
            )

    # ------------------------------------------------------------------ operations
    def ping(self) -> bool:
        """Probe Redis if allowed now (always when up, once per backoff when down); True when it answered."""
        if not self._claim():
            return False
        try:
            self._client.ping()
        except _UNREACHABLE as exc:
            self._failed(exc)
            return False
        self._succeeded()
        return True

    def get(self, key: str) -> bytes | None:
        """The stored bytes, or None on a miss, while down, or on any Redis error."""
        value = self._call("GET", key, lambda: self._client.get(key))
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes) -> bool:
        """Store `value` (with the TTL if one was set); False when it could not be stored."""
        return self._call("SET", key, lambda: self._client.set(key, value, px=self._ttl_ms)) is not None

    def _call(self, op: str, key: str, fn: Callable[[], object]) -> object | None:
        """Run one command; None while down, when unreachable (marks the tier down) or on any other Redis error
        (the server answered, so it stays up)."""
        if not self._claim():
            return None
        try:
            result = fn()
        except _UNREACHABLE as exc:
            self._failed(exc)
            return None
        except redis.exceptions.RedisError as exc:
            logger.debug("Redis %s %s failed: %s", op, key, exc)
            self._succeeded()
            return None
        self._succeeded()
        return result

    def health(self) -> dict[str, object]:
        """{"configured": True, "ok", "error", "url"}; probes first if a retry is due, so it can report recovery."""
        with self._lock:
            due = not self._ok and self._clock() >= self._retry_at
        if due:
            self.ping()
        with self._lock:
            return {"configured": True, "ok": self._ok, "error": self._error, "url": self.url}

    def close(self) -> None:
        self._client.close()
