"""How every `rtvox` command reports an rtvox error: one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from rtvox.errors import InputError, RtvoxError


@contextlib.contextmanager
def one_message() -> Iterator[None]:
    """Run a command body; an rtvox error becomes "error: ..." on stderr and exit status 2 (bad input) or 1, an
    operating-system error (a file that cannot be written) "error: ..." and status 1."""
    try:
        yield
    except RtvoxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if isinstance(exc, InputError) else 1) from None
    except OSError as exc:  # the file system said no (disk full, permissions, a path gone meanwhile)
        where = f": {exc.filename}" if exc.filename else ""
        typer.echo(f"error: {exc.strerror or exc}{where}", err=True)
        raise typer.Exit(1) from None
