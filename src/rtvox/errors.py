"""Exception types. Messages say what went wrong and what to do; the server maps InputError to 4xx."""

from __future__ import annotations


class RtvoxError(Exception):
    """Base class for every error rtvox raises on purpose."""


class InputError(RtvoxError, ValueError):
    """The caller's input cannot be used (HTTP 400/422, CLI exit 2)."""

    param: str | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class TextError(InputError):
    """The text has nothing speakable, is too long, or has a malformed inline pronunciation."""


class AudioInputError(InputError):
    """A reference clip cannot be decoded or is unusable (too short/long, silent, clipped)."""


class VoiceNotFoundError(InputError):
    """The requested voice name or id is unknown."""


class ModelError(RtvoxError):
    """A model directory is missing, incomplete or inconsistent (an operator problem, not the caller's)."""
