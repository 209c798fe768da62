"""Every error leaves the server as OpenAI-style JSON: {"error": {"message", "type", "param", "code"}}.

Anything the client got wrong is a 4xx with a message that says how to fix it; a 5xx means a server fault
(or an overloaded or broken deployment), never bad input.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from rtvox.errors import AudioInputError, InputError, RtvoxError, VoiceNotFoundError
from rtvox.runtime.sched_types import (
    DeadlineExceededError,
    EngineFailedError,
    QueueFullError,
    ServiceUnavailableError,
)

log = logging.getLogger("rtvox.server")

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
RATE_LIMIT = "rate_limit_error"
SERVER_ERROR = "server_error"

# A path quoted in an error message is cut to this many characters.
MAX_QUOTED_PATH = 200

# Default (type, code) of plain HTTP errors raised by the framework (unknown path, wrong method, ...).
_HTTP_CODES: dict[int, tuple[str, str]] = {
    401: (AUTHENTICATION, "invalid_api_key"),
    404: (INVALID_REQUEST, "not_found"),
    405: (INVALID_REQUEST, "method_not_allowed"),
    413: (INVALID_REQUEST, "request_too_large"),
    415: (INVALID_REQUEST, "unsupported_media_type"),
    429: (RATE_LIMIT, "rate_limit_exceeded"),
    503: (SERVER_ERROR, "service_unavailable"),
}


class APIError(Exception):
    """An error response the server chose on purpose: status, OpenAI-style body and optional headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.type, exc.param, exc.code), exc.status, headers=exc.headers)


def to_api_error(exc: BaseException) -> APIError:
    """The response an exception from the runtime or the framework stands for."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, VoiceNotFoundError):  # a resource in the path (DELETE …/voices/{id}) is 404; a body field 400,
        param = exc.param or "voice"  # as OpenAI answers an unknown `voice` (the openai client's BadRequestError)
        return APIError(404 if param == "voice_id" else 400, str(exc), param=param, code="voice_not_found")
    if isinstance(exc, AudioInputError):
        return APIError(400, str(exc), param=exc.param, code="invalid_audio")
    if isinstance(exc, InputError):
        return APIError(400, str(exc), param=exc.param, code="invalid_value")
    if isinstance(exc, QueueFullError):
        retry = str(max(1, int(exc.retry_after_s)))
        return APIError(429, str(exc), type=RATE_LIMIT, code="queue_full", headers={"Retry-After": retry})
    if isinstance(exc, DeadlineExceededError):
        return APIError(504, str(exc), type=SERVER_ERROR, code="deadline_exceeded")
    if isinstance(exc, ServiceUnavailableError):
        return APIError(503, str(exc), type=SERVER_ERROR, code="unavailable", headers={"Retry-After": "1"})
    if isinstance(exc, EngineFailedError):
        log.error("engines failed: %s", exc)
        return APIError(500, f"{exc}; retry shortly", type=SERVER_ERROR, code="engine_failed")
    if isinstance(exc, RtvoxError):
        log.error("runtime error: %s", exc)
        return APIError(503, f"the speech service cannot serve this now: {exc}", type=SERVER_ERROR, code="unavailable")
    log.exception("unhandled error", exc_info=exc)
    return APIError(500, "internal server error; the server log has the details", type=SERVER_ERROR, code="internal")


def _validation_param(loc: Sequence[Any]) -> str | None:
    # loc is ("body", "speed") or ("body", "voice", "str") (the last one a union member's tag, not a field):
    # the top-level field is what the client can act on.
    if len(loc) >= 2 and loc[0] in ("body", "query", "path", "header", "form", "cookie"):
        return str(loc[1])
    return None


def validation_error(exc: RequestValidationError) -> APIError:
    errors = list(exc.errors())
    if not errors:
        return APIError(400, "the request is invalid", code="invalid_request")
    param = _validation_param(errors[0].get("loc", ()))
    # A field with several accepted shapes (`voice`: a name or {"id": ...}) fails once per shape: the error that
    # got deepest is the shape the client meant ({"voice": {}} lacks an id; it is not "a valid string").
    same = [e for e in errors if _validation_param(e.get("loc", ())) == param]
    first = max(same, key=lambda e: len(e.get("loc", ())))
    kind = str(first.get("type", "invalid"))
    if kind == "json_invalid":
        return APIError(400, "the body is not valid JSON; send a JSON object", code="invalid_json")
    loc = first.get("loc", ())
    name = f"{param}.{loc[-1]}" if param and len(loc) > 3 else param  # ("body", "voice", "VoiceRef", "id")
    where = f"'{name}'" if name else "the body"
    message = f"{where}: {first.get('msg', 'invalid value')}"
    if kind == "missing":
        message = f"{where} is required"
    if more := len({_validation_param(e.get("loc", ())) for e in errors} - {param}):  # other fields' problems
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return APIError(400, message, param=param, code="missing" if kind == "missing" else "invalid_value")


def _allowed_methods(request: Request, routes: Sequence[BaseRoute]) -> str:
    """Every method some route takes at this path: the framework's Allow names only the first route's (GET for
    /v1/audio/voices, which takes POST too). `routes`: those of included routers, which the app's own list holds
    only inside their routers."""
    methods: set[str] = set()
    for route in (*request.app.router.routes, *routes):
        taken = getattr(route, "methods", None)
        if taken and route.matches(request.scope)[0] != Match.NONE:
            methods |= taken
    if "GET" in methods:
        methods.add("HEAD")  # every GET route answers HEAD too (app.HeadAsGetMiddleware)
    return ", ".join(sorted(methods))


def _route_message(request: Request, status: int, allow: str) -> str:
    """What the framework's bare "Not Found" / "Method Not Allowed" meant, naming the method and path."""
    path = request.url.path
    if len(path) > MAX_QUOTED_PATH:
        path = path[:MAX_QUOTED_PATH] + "…"
    if status == 405:
        return f"{request.method} is not allowed on {path}; use {allow or 'another method'} (see /docs)"
    return f"nothing at {request.method} {path}; see /docs for the API's routes"


def install_error_handlers(
    app: FastAPI, routes: Sequence[BaseRoute] = (), auth: Callable[[Request], Awaitable[None]] | None = None
) -> None:
    """Every error as OpenAI-style JSON; `routes`: the API's routes, for the methods a 405 names; `auth`: their key
    check, which a request's body errors must not come before (below)."""
    api_paths = {getattr(route, "path", None) for route in routes}

    async def refused(request: Request) -> JSONResponse | None:
        # FastAPI parses a body (JSON, multipart) before it runs the route's dependencies, so a body it cannot parse
        # was answered with a 400 before the key check: a client without a key must get the 401, as from OpenAI.
        if auth is None or getattr(request.scope.get("route"), "path", None) not in api_paths:
            return None
        try:
            await auth(request)
        except APIError as exc:
            return error_response(exc)
        return None

    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        return error_response(to_api_error(exc))

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return await refused(request) or error_response(validation_error(exc))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        type_, code = _HTTP_CODES.get(
            exc.status_code, (INVALID_REQUEST if exc.status_code < 500 else SERVER_ERROR, None)
        )
        headers = dict(exc.headers or {})
        message = str(exc.detail).rstrip(".")
        if exc.status_code == 400:  # the framework could not parse the body at all
            if (denied := await refused(request)) is not None:
                return denied
            message += "; send UTF-8 JSON with Content-Type: application/json (multipart/form-data for uploads)"
        elif exc.status_code in (404, 405) and exc.detail == HTTPStatus(exc.status_code).phrase:
            if exc.status_code == 405:
                headers["Allow"] = _allowed_methods(request, routes) or headers.get("Allow", "")
            message = _route_message(request, exc.status_code, headers.get("Allow", ""))
        return error_response(APIError(exc.status_code, message, type=type_, code=code, headers=headers))

    app.add_exception_handler(APIError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RtvoxError, on_api_error)
    app.add_exception_handler(Exception, on_api_error)
