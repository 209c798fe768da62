"""How every `rtvox` command reports an rtvox error: one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


def check_output_path(output: Path, *, make_folder: bool = False) -> None:
    """InputError unless OUTPUT names a file in an existing (with `make_folder`: creatable), writable folder."""
    if output.is_dir():
        raise InputError(f"output {output} is a folder; give a file name", param="output")
    if output.exists() and not output.is_file():  # a device (/dev/null, /dev/stdout) or a FIFO: written in place
        if not os.access(output, os.W_OK):
            raise InputError(f"cannot write {output}: permission denied", param="output")
        return
    folder = output.parent
    if make_folder and not folder.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            message = f"cannot create the output folder {folder}: {exc.strerror or exc}"
            raise InputError(message, param="output") from None
    if not folder.is_dir():
        if folder.exists():
            raise InputError(f"{folder} is a file, not a folder; give an output path in a folder", param="output")
        raise InputError(f"output folder {folder} does not exist; create it first", param="output")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"output folder {folder} is not writable", param="output")
    try:
        probe_writable(folder)
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}", param="output") from None


def check_output_folder(folder: Path) -> None:
    """InputError unless FOLDER is (or can be made) a folder this process can write into; checked before the
    model loads, as for output files."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"output {folder} is a file; give a folder", param="out")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe_writable(folder)
    except OSError as exc:
        raise InputError(f"cannot write into {folder}: {exc.strerror or exc}", param="out") from None


@contextlib.contextmanager
def no_empty_folder_left(folder: Path) -> Iterator[None]:
    """Run a command that writes into FOLDER; if it fails, the folders made for it (FOLDER and any missing parents)
    are removed again while empty: a bad flag or model found after `check_output_folder` leaves nothing behind,
    while whatever was written stays."""
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # innermost first
    try:
        yield
    except BaseException:
        for path in made:
            try:
                path.rmdir()  # fails on a folder that holds something: kept, and so are its parents
            except OSError:
                break
        raise


def check_listen(host: str, port: int) -> None:
    """InputError unless this process can listen on HOST:PORT, checked as uvicorn binds (before the model loads,
    where uvicorn would fail only after it, in several lines of log and exit status 3)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:
            raise InputError(f"cannot listen on --host {host}: {exc.strerror}", param="host") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                message = f"port {port} on {host} is already in use; stop what listens there or choose another --port"
                raise InputError(message, param="port") from None
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", param="port") from None


def probe_writable(folder: Path) -> None:
    """Make and remove a file in FOLDER (OSError if that fails): os.access trusts mode bits, while /proc, /sys and
    read-only mounts refuse the file itself."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".rtvox-probe-"):
        pass
