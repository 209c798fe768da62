"""audio_file_writer: a file encoded part by part equals encode_audio of all the parts, and appears whole or not at
all (a failure midway leaves the target as it was and no temp file); devices and FIFOs are written in place."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest

from rtvox.audio import decode_audio, encode_audio, resample
from rtvox.audio.encode import audio_file_writer, wav_header
from rtvox.constants import AUDIO_FORMATS, SAMPLE_RATE
from rtvox.fsutil import NEW_FILE_MODE

SR = SAMPLE_RATE
Speech = Callable[..., np.ndarray]
Correlate = Callable[..., float]
LOSSLESS = ("pcm", "wav", "flac")
# Lossy codecs add encoder delay/padding (aac priming, mp3 without a LAME header when streamed).
MAX_EXTRA_SAMPLES = 2_500


class Crash(RuntimeError):
    pass


def _parts(speech: Speech) -> list[np.ndarray]:
    """A document's parts: uneven lengths, an empty one, a one-sample one."""
    return [
        speech(SR, 0.4, seed=1),
        np.zeros(0, np.float32),
        speech(SR, 1.3, seed=2),
        np.float32([0.5]),
        speech(SR, 0.25),
    ]


def _write(path: Path | str, parts: Iterable[np.ndarray], fmt: str | None = None) -> int:
    with audio_file_writer(path, SR, fmt) as out:
        for part in parts:
            out.write(part)
    return out.samples


def _decode(data: bytes, fmt: str) -> np.ndarray:
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0
    wav, sr = decode_audio(data)
    return resample(wav, sr, SR)


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_parts_written_one_by_one_equal_the_whole(
    fmt: str, tmp_path: Path, speech: Speech, correlate: Correlate
) -> None:
    parts = _parts(speech)
    whole = np.concatenate(parts)
    path = tmp_path / f"book.{fmt}"
    assert _write(path, parts, fmt) == whole.shape[0]
    data, expected = path.read_bytes(), encode_audio(whole, SR, fmt)
    out = _decode(data, fmt)
    if fmt in LOSSLESS:
        assert data == expected  # byte for byte: the wav sizes and the flac header were filled in at the end
        np.testing.assert_allclose(out, whole, atol=1.0 / 32767 + 1e-6)
        return
    assert out.shape == _decode(expected, fmt).shape
    if fmt == "mp3":  # written to a seekable file, the LAME header records the delay: the length is exact
        assert out.shape == whole.shape
    else:
        assert whole.shape[0] - 5 <= out.shape[0] <= whole.shape[0] + MAX_EXTRA_SAMPLES
    assert correlate(whole, out) > 0.97


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
@pytest.mark.parametrize("parts", [[], [np.zeros(0, np.float32)] * 2], ids=["no-parts", "empty-parts"])
def test_no_samples_give_what_encode_audio_gives(fmt: str, parts: list[np.ndarray], tmp_path: Path) -> None:
    path = tmp_path / "empty.out"
    assert _write(path, parts, fmt) == 0
    expected = encode_audio(np.zeros(0, np.float32), SR, fmt)  # flac: a valid empty file (FFmpeg's, not libsndfile)
    assert path.read_bytes() == expected
    if fmt == "wav":
        assert expected == wav_header(SR, 0)
    if fmt == "flac":
        assert expected[:4] == b"fLaC"


def test_the_file_grows_while_parts_are_written(tmp_path: Path, speech: Speech) -> None:
    # Encoded part by part onto disk (a temp file beside the target), not gathered in memory until the end.
    path = tmp_path / "book.wav"
    part = speech(SR, 1.0)
    with audio_file_writer(path, SR) as out:
        for n in range(1, 4):
            out.write(part)
            (tmp,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
            assert tmp.name.startswith(".book.wav.") and tmp.stat().st_size >= 44 + 2 * n * part.shape[0]
        assert not path.exists()
    assert path.stat().st_size == 44 + 2 * 3 * part.shape[0]
    assert [p.name for p in tmp_path.iterdir()] == ["book.wav"]


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
@pytest.mark.parametrize("existing", [True, False], ids=["replaced", "new"])
def test_a_failure_midway_leaves_the_target_untouched(fmt: str, existing: bool, tmp_path: Path, speech: Speech) -> None:
    path = tmp_path / f"book.{fmt}"
    if existing:
        path.write_bytes(b"the old book")

    def parts() -> Iterator[np.ndarray]:
        yield speech(SR, 0.5)
        yield speech(SR, 0.3, seed=1)
        raise Crash("synthesis failed after two parts")

    with pytest.raises(Crash):
        _write(path, parts(), fmt)
    assert [p.name for p in tmp_path.iterdir()] == ([path.name] if existing else [])  # no temp file left
    if existing:
        assert path.read_bytes() == b"the old book"


def test_modes_and_links_are_kept(tmp_path: Path, speech: Speech) -> None:
    fresh = tmp_path / "fresh.flac"
    _write(fresh, [speech(SR, 0.1)])
    assert stat.S_IMODE(fresh.stat().st_mode) == NEW_FILE_MODE
    kept = tmp_path / "kept.mp3"
    kept.write_bytes(b"")
    kept.chmod(0o600)
    _write(kept, [speech(SR, 0.1)])
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.stat().st_size > 0
    link = tmp_path / "link.wav"
    link.symlink_to(fresh)
    _write(link, [speech(SR, 0.1)])
    assert link.is_symlink() and fresh.read_bytes()[:4] == b"RIFF"


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_dev_null_is_written_in_place(fmt: str, speech: Speech) -> None:
    assert _write(os.devnull, _parts(speech), fmt) > 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_a_fifo_gets_a_file_that_decodes(fmt: str, tmp_path: Path, speech: Speech, correlate: Correlate) -> None:
    # A FIFO cannot seek: wav gets the streaming header, mp3/opus/aac FFmpeg's streaming muxing, and flac (whose
    # header must carry its length) is built in a spool first, so libsndfile still reads it to its length.
    fifo = tmp_path / f"out.{fmt}"
    os.mkfifo(fifo)
    parts = _parts(speech)
    whole = np.concatenate(parts)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    _write(fifo, parts)
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == [fifo.name]
    (data,) = got
    if fmt == "wav":
        assert data == wav_header(SR, None) + encode_audio(whole, SR, "pcm")
    elif fmt in LOSSLESS:
        assert data == encode_audio(whole, SR, fmt)
    else:
        out = _decode(data, fmt)
        assert whole.shape[0] - 5 <= out.shape[0] <= whole.shape[0] + MAX_EXTRA_SAMPLES
        assert correlate(whole, out) > 0.97


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3"])
def test_a_failure_at_close_leaves_the_target_untouched(
    fmt: str, tmp_path: Path, speech: Speech, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The codec's own last step failing (a disk that fills while the header is written) keeps nothing either."""
    from rtvox.audio.encode import FileEncoder

    def full_disk(self: FileEncoder) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FileEncoder, "close", full_disk)
    path = tmp_path / f"book.{fmt}"
    path.write_bytes(b"the old book")
    with pytest.raises(OSError, match="No space left"):
        _write(path, [speech(SR, 0.5)], fmt)
    assert [p.name for p in tmp_path.iterdir()] == [path.name] and path.read_bytes() == b"the old book"


def test_an_output_not_at_its_start_is_refused() -> None:
    import io

    from rtvox.audio.encode import FileEncoder

    out = io.BytesIO(b"PREFIX")
    out.seek(0, io.SEEK_END)
    with pytest.raises(ValueError, match="positioned at its start"):
        FileEncoder(out, SR, "flac")
