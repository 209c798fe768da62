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


class RedisState:
    """Whether Redis may be used now: up, or down until its next probe. Owns the backoff clock, the last error
    and the count of outages; logs one warning per outage and one when it ends. Thread-safe. One per process and
    URL, shared by every user of that Redis (the embedding tier and the server's voice table), so what one of them
    meets, health() reports and the others skip.
    """

    def __init__(self, url: str, retry_backoff_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.retry_backoff_s = retry_backoff_s
        self._clock = clock
        self._lock = threading.Lock()
        self._ok = True
        self._error: str | None = None
        self._retry_at = 0.0
        self._outages = 0

    @property
    def ok(self) -> bool:
        return self._ok

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def outages(self) -> int:
        """How many times Redis has gone down since start: a user that saw a lower count missed an outage."""
        return self._outages

    def probe_due(self) -> bool:
        with self._lock:
            return not self._ok and self._clock() >= self._retry_at

    def claim(self) -> bool:
        """Whether this call may use Redis now; while down, exactly one caller per backoff period gets to probe."""
        with self._lock:
            if self._ok:
                return True
            now = self._clock()
            if now < self._retry_at:
                return False
            self._retry_at = now + self.retry_backoff_s
            return True

    def succeeded(self) -> None:
        with self._lock:
            if not self._ok:
                logger.warning("Redis at %s is reachable again; using it", self.url)
            self._ok, self._error = True, None

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            first = self._ok
            self._ok, self._error = False, f"{type(exc).__name__}: {exc}"
            self._retry_at = self._clock() + self.retry_backoff_s
            self._outages += first
        if first:  # one warning per outage, not one per request
            logger.warning(
                "Redis at %s is unreachable (%s); embeddings and voices are served from this process only, "
                "retrying every %g s",
                self.url,
                self._error,
                self.retry_backoff_s,
            )


class RedisTier:
    """A Redis connection that degrades instead of failing. Owns the client and its RedisState (up/down and the
    backoff clock; `state`, for other users of the same Redis); knows nothing about embeddings (values are opaque
    bytes). Thread-safe: the client pools connections and the state has its own lock.
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
        # No client-side retries: one failed call means "down", and the backoff decides when to try again.
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self.state = RedisState(self.url, retry_backoff_s, clock)
        # Probe at start so a misconfigured URL shows up in the log and in health() before the first request.
        self.ping()

    # ------------------------------------------------------------------ operations
    def ping(self) -> bool:
        """Probe Redis if allowed now (always when up, once per backoff when down); True when it answered."""
        if not self.state.claim():
            return False
        try:
            self._client.ping()
        except (redis.exceptions.RedisError, OSError) as exc:  # any error to a PING (e.g. "DB index is out of
            self.state.failed(exc)  # range" from a wrong /db in the URL) leaves Redis unusable for us
            return False
        self.state.succeeded()
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
        (the server answered, but that is no sign it is usable again: a probe while down stays down)."""
        if not self.state.claim():
            return None
        try:
            result = fn()
        except _UNREACHABLE as exc:
            self.state.failed(exc)
            return None
        except redis.exceptions.RedisError as exc:
            logger.debug("Redis %s %s failed: %s", op, key, exc)
            return None
        self.state.succeeded()
        return result

    def health(self) -> dict[str, object]:
        """{"configured": True, "ok", "error", "url"}; probes first if a retry is due, so it can report recovery."""
        if self.state.probe_due():
            self.ping()
        return {"configured": True, "ok": self.state.ok, "error": self.state.error, "url": self.url}

    def close(self) -> None:
        self._client.close()
