"""Request safety: Bearer API keys, body size limits, content-type checks.

Keys are compared in constant time. Body limits are enforced while the body streams in (a missing or lying
Content-Length cannot get past them), before any decoder sees the bytes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable

from fastapi import Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rtvox.server.errors import AUTHENTICATION, INVALID_REQUEST, APIError, error_body


class ApiKeyCheck:
    """A route dependency: with keys configured, requests need `Authorization: Bearer <key>`."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    async def __call__(self, request: Request) -> None:
        if not self._keys:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise APIError(
                401,
                "missing API key: send the header 'Authorization: Bearer <key>'",
                type=AUTHENTICATION,
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        given = token.strip().encode()
        # Check every key so the time taken does not say which one came close.
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(given, key)
        if not matched:
            raise APIError(
                401,
                "invalid API key; check the key given to the server with --api-key / RTVOX_API_KEYS",
                type=AUTHENTICATION,
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )


def require_content_type(*allowed: str) -> Callable[[Request], Awaitable[None]]:
    """A route dependency refusing bodies of other media types with 415 (before any parsing)."""

    async def check(request: Request) -> None:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in allowed:
            raise APIError(
                415,
                f"Content-Type {media or '(none)'!r} is not accepted here; send {' or '.join(allowed)}",
                code="unsupported_media_type",
                param="Content-Type",
            )

    return check


class BodyTooLarge(StarletteHTTPException):
    """Raised from inside body reading; a framework HTTPException so FastAPI passes it on as a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over the limit of {limit} bytes; send a smaller clip or shorter text")


class BodyLimitMiddleware:
    """Pure ASGI: refuses bodies larger than `limit` bytes with 413, by header or while streaming."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _send_413(send, self.limit)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_413(send: Send, limit: int) -> None:
    message = f"request body over the limit of {limit} bytes; send a smaller clip or shorter text"
    body = json.dumps(error_body(message, INVALID_REQUEST, None, "request_too_large")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
