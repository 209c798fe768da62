"""atomic_write_bytes: whole files or none, links kept, devices and FIFOs written in place (never renamed over)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from rtvox.fsutil import NEW_FILE_MODE, atomic_write_bytes


def test_new_and_replaced_files_are_whole_and_keep_their_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    atomic_write_bytes(path, b"one")
    assert path.read_bytes() == b"one" and stat.S_IMODE(path.stat().st_mode) == NEW_FILE_MODE
    path.chmod(0o600)
    atomic_write_bytes(path, b"two")
    assert path.read_bytes() == b"two" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["a.wav"]  # no temp file left behind


def test_a_symlink_stays_a_link_to_the_rewritten_file(tmp_path: Path) -> None:
    real, link = tmp_path / "real.wav", tmp_path / "link.wav"
    real.write_bytes(b"old")
    link.symlink_to(real)
    assert atomic_write_bytes(link, b"new") == link
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_dev_null_stays_a_device() -> None:
    atomic_write_bytes(os.devnull, b"x" * 100)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "out.wav"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_bytes(fifo, b"audio bytes")
    reader.join(timeout=10)
    assert got == [b"audio bytes"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_pipe_named_through_proc_is_written_in_place() -> None:
    """/dev/stdout when stdout is a pipe: the link resolves to "pipe:[N]", which names no file in any folder."""
    read_end, write_end = os.pipe()
    try:
        atomic_write_bytes(f"/proc/self/fd/{write_end}", b"audio bytes")
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"audio bytes"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        atomic_write_bytes(tmp_path, b"x")
