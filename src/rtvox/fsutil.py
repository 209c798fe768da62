"""Atomic file writes: a temp file in the target's folder, fsync, then rename — readers never see half a file; and
reading a user's UTF-8 text file with one clear error for each way that fails."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# Mode of a newly created file (what open() gives under the usual 022 umask). Reading the real umask would
# mean changing it process-wide, which races with other threads creating files.
NEW_FILE_MODE = 0o644


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically (see `atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(data)
    return Path(path)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write `path` into, committed when the block ends without an error: the data goes to a
    temp file beside the target, fsync'd, then renamed over it; on any error the temp file is removed and the
    target left as it was. A replaced file keeps its mode, a new one gets NEW_FILE_MODE. A symbolic link keeps
    pointing where it did (the file it names is replaced). What is not a regular file — a device such as
    /dev/null or /dev/stdout's target, a FIFO, a terminal — is written to in place: renaming over it would put a
    regular file where the device was."""
    target = Path(os.path.realpath(path))
    try:  # through `path` itself: /dev/stdout on a pipe resolves to a name ("pipe:[N]") that no folder holds
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{path} is a folder")
        with open(path, "wb") as fh:
            yield fh
        return
    mode = st.st_mode & 0o777 if st is not None else NEW_FILE_MODE
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)  # mkstemp makes files private (0600)
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def read_user_text(path: Path, what: str) -> str:
    """The UTF-8 text of a file the user named; InputError saying which `what` ("text file", "sentence file")
    does not exist, is a folder, is not UTF-8 text or cannot be read."""
    from rtvox.errors import InputError

    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder; give a text file") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
