"""Offline mode: many requests, or one long document, synthesized for throughput rather than latency.

`synthesize_many` prepares a window of requests, sorts every chunk of the window by length (little padding) and
runs them in large static batches through the same chunk step the service uses, then yields results in request
order. `speak_document` turns a book into segments (paragraph groups), synthesizes them with `synthesize_many`,
and keeps each finished segment on disk beside the output, so a crash or Ctrl-C keeps what was done and running
the same command again continues where it stopped; at the end the parts are encoded into the output one at a
time (memory does not grow with the book), which appears whole when done (atomically) and only then are the
parts removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rtvox.constants import SAMPLE_RATE
from rtvox.errors import InputError, ModelError
from rtvox.fsutil import atomic_write_bytes
from rtvox.models.bundle import model_hash
from rtvox.runtime.steps import ChunkJob, PreparedRequest
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult
from rtvox.text.result import FrontendResult

if TYPE_CHECKING:
    from rtvox.runtime.synthesizer import Synthesizer

ProgressFn = Callable[[int, int], None]  # (done, known so far): chunks, or a document's segments

# Requests prepared together; their chunks are sorted by length across the whole window before batching.
WINDOW_BATCHES = 4
SEGMENT_CHARS = 2000  # a document segment: whole paragraphs up to about this many characters
MANIFEST = "manifest.json"
PARTS_SUFFIX = ".parts"
_FORMAT_VERSION = 1
PROGRESS_MIN_CHARS = 400  # shorter documents get no progress bar
_ATOMIC_TEMP = re.compile(r"[a-z0-9_]{8}\.tmp")  # after ".NAME.": tempfile.mkstemp's 8 random characters


def synthesize_many(
    synth: Synthesizer,
    requests: Iterable[SynthesisRequest],
    *,
    max_batch: int = 64,
    progress: ProgressFn | None = None,
    window_batches: int = WINDOW_BATCHES,
    fronts: Iterable[FrontendResult] | None = None,
) -> Iterator[SynthesisResult]:
    """Synthesize `requests` in large static batches; yields one SynthesisResult per request, in order.

    Each result equals `synth.synthesize` of the same request (up to float rounding): same prepare, same step.
    `fronts`: the frontend's results for the requests' texts, in the same order, when the caller has them already
    (a document's segments: the frontend runs once per segment). A request that cannot be spoken (nothing
    speakable, an unknown voice) stops the batch with its InputError, its message led by "request N of the
    batch" (from 0); results of earlier windows have been yielded by then.
    """
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    done = known = 0
    pending: list[PreparedRequest] = []
    # requests are prepared and run a window of chunks at a time (sorted by length inside it): results leave
    # once their window is done, so a smaller window saves a document's parts and moves its progress sooner
    window_chunks = max_batch * max(1, window_batches)
    it = iter(requests)
    front_it = iter(fronts) if fronts is not None else None
    end = object()  # not None: a None item is an error, not the end
    for position in itertools.count():
        item = next(it, end)
        if item is not end and not isinstance(item, SynthesisRequest):
            raise InputError(
                f"synthesize_many takes SynthesisRequest items, got {type(item).__name__} at item {position}"
            )
        request = item if isinstance(item, SynthesisRequest) else None
        if request is not None:
            front = next(front_it) if front_it is not None else None
            try:
                pending.append(synth.prepare(request, front))
            except InputError as e:  # same type and param, and which of many requests it was
                raise type(e)(f"request {position} of the batch: {e}", param=e.param) from e
            known += len(pending[-1].chunks)
            if sum(len(p.chunks) for p in pending) < window_chunks:
                continue
        if not pending:
            return
        jobs = [ChunkJob(p, i) for p in pending for i in range(len(p.chunks))]
        jobs.sort(key=lambda j: len(j.prepared.chunks[j.index].ids))
        outputs: dict[tuple[int, int], AudioChunk] = {}
        for lo in range(0, len(jobs), max_batch):
            batch = jobs[lo : lo + max_batch]
            for job, out in zip(batch, synth.run_step(batch), strict=True):
                outputs[(id(job.prepared), job.index)] = out
            done += len(batch)
            if progress is not None:
                progress(done, known)
        for prepared in pending:
            chunks = tuple(outputs[(id(prepared), i)] for i in range(len(prepared.chunks)))
            audio = np.concatenate([c.audio for c in chunks])
            yield SynthesisResult(audio=audio, sample_rate=SAMPLE_RATE, chunks=chunks)
        pending = []
        if request is None:
            return


# A full stop after one of these ends no sentence ("Dr. Smith", "e.g. this").
_ABBREVIATION = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e|No|Mt|Fig|approx)\.$", re.IGNORECASE)


def split_document(text: str, max_chars: int) -> list[str]:
    """Whole paragraphs (lines) grouped up to ~max_chars; a longer paragraph is cut at sentence ends."""
    pieces: list[str] = []
    for paragraph in (p.strip() for p in text.splitlines()):
        if not paragraph:
            continue
        while len(paragraph) > max_chars:
            # cut after the last sentence end within the limit, else hard at the limit
            # a full stop ends a sentence only before a space or the end (3.14, Dr. Smith, $3.50 are not cut)
            head = paragraph[:max_chars]
            ends = [
                m.end()
                for m in re.finditer(r"(?:[。！？!?;；]|\.(?=\s|$))\s*", head)
                if not _ABBREVIATION.search(head, 0, m.start() + 1)
            ]
            if not ends:  # no sentence end: a clause, else a space, else the limit
                ends = [m.end() for m in re.finditer(r"[，,、：:]\s*", head)] or [
                    m.end() for m in re.finditer(r"\s+", head)
                ]
            cut = ends[-1] if ends else max_chars
            pieces.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if paragraph:
            pieces.append(paragraph)
    segments: list[str] = []
    for piece in pieces:
        if segments and len(segments[-1]) + 1 + len(piece) <= max_chars:
            segments[-1] = segments[-1] + "\n" + piece
        else:
            segments.append(piece)
    return segments


def _fingerprint(synth: Synthesizer, segments: Sequence[str], base: SynthesisRequest) -> str:
    """What the saved segments depend on: text, settings, the model's weights, the engines (backend, device,
    dtype), the voice's embedding (a clone re-made under the same name is another voice) and the lexicon; a change
    restarts from scratch."""
    digest = hashlib.sha256()
    try:
        model = model_hash(synth.model_dir)
    except ModelError:  # a family without the bundle's layout: its folder stands in
        model = str(synth.model_dir.resolve())
    # the engines' device and precision too: a run resumed on another device or dtype would join audio rendered
    # by two engine builds (close, not equal), where a resumed document is otherwise byte-equal to one run
    for value in (str(_FORMAT_VERSION), model, synth.backend, str(synth.device), str(synth.dtype), *segments):
        digest.update(value.encode() + b"\0")
    lexicon = synth.frontend.lexicon
    for table in (lexicon.zh, lexicon.en):
        digest.update(repr(sorted(table.items())).encode() + b"\0")
    if base.speaker_embedding is None:
        voice = synth.voices.get(base.voice or synth.default_voice)
        digest.update(np.ascontiguousarray(voice.embedding, dtype=np.float32).tobytes())
    for name in ("voice", "emotion", "emotion_alpha", "speed", "pitch_scale", "energy_scale"):
        digest.update(f"{name}={getattr(base, name)!r}".encode() + b"\0")
    for array in (base.speaker_embedding, base.emotion_ref, base.speaker_timbre):
        digest.update(b"-" if array is None else np.ascontiguousarray(array, dtype=np.float32).tobytes())
    return digest.hexdigest()


def speak_document(
    synth: Synthesizer,
    text: str,
    output: Path,
    fmt: str,
    base: SynthesisRequest,
    *,
    max_batch: int = 64,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    write_progress: ProgressFn | None = None,
    locked: bool = False,
) -> float:
    """Synthesize a long text into `output`, resumable; returns the audio seconds written.

    `base` carries the settings (its text is ignored). Finished segments live in `<output>.parts/` until the
    output is written; a manifest fingerprint of text, settings and model guards against mixing runs. What the
    frontend leaves out goes to `warn`; a segment with nothing speakable (a line of emoji) is skipped, and only
    a document with nothing speakable at all is an error. `progress` gets (segments synthesized, segments);
    `write_progress` then (segments encoded into the output, segments): encoding a long mp3 takes minutes.
    `locked`: the caller holds `output_lock(output)` (else this run takes it).
    """

    segments, fronts = [], []
    for segment in split_document(text, SEGMENT_CHARS):  # read at call time (tests shrink it)
        front = synth.frontend.process(segment)
        if warn is not None:
            for warning in front.warnings:
                warn(warning)
        if front.chunks:
            segments.append(segment)
            fronts.append(front)  # kept for the synthesis: the frontend runs once per segment
    if not segments:
        synth.prepare(replace(base, text=text))  # raises the frontend's "nothing to speak" TextError
    fingerprint = _fingerprint(synth, segments, base)
    with _parts_folder(output, locked) as parts:
        try:
            return _speak_segments(
                synth, segments, fronts, output, fmt, base, parts, fingerprint, max_batch, progress, write_progress
            )
        except BaseException:
            if parts.is_dir() and not any(parts.glob("segment-*.npy")):
                shutil.rmtree(parts, ignore_errors=True)  # nothing done yet: leave no folder behind
            raise


@contextlib.contextmanager
def output_lock(output: Path) -> Iterator[None]:
    """Hold `output` for this run: a second run of the same output, which would delete the first's parts when its
    settings differ or race it for them, is refused at once (an InputError) instead of failing at the end. The CLI
    takes it before loading the model, so the refusal costs nothing; speak_document takes it itself otherwise. A
    device or FIFO output (/dev/null, a pipe) is not locked (nothing is written beside it)."""
    if output.exists() and not output.is_file():
        yield
        return
    lock_path = output.with_name(f".{output.name}.lock")
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # a run that ended between our open and our lock removed the file we opened: a lock on it would
            # not keep out the next run, which opens a new file at the same path
            if not _same_file(lock.fileno(), lock_path):
                raise BlockingIOError
        except BlockingIOError:
            raise InputError(
                f"another rtvox run is writing {output} right now; wait for it or choose another output",
                param="output",
            ) from None
        # a run killed (SIGKILL, power) during its final encode left that encode's temp file beside the output
        # (rtvox.fsutil.atomic_open's `.NAME.XXXXXXXX.tmp`); holding this output's lock, it is a dead run's
        for stale in output.parent.glob(f".{glob.escape(output.name)}.*.tmp"):
            if _ATOMIC_TEMP.fullmatch(stale.name[len(output.name) + 2 :]) and stale.is_file():
                stale.unlink(missing_ok=True)
        try:
            yield
        finally:
            lock_path.unlink(missing_ok=True)


@contextlib.contextmanager
def _parts_folder(output: Path, locked: bool) -> Iterator[Path]:
    """Where a document's finished segments wait: `<output>.parts` beside the output, under the output's lock
    (taken here unless the caller holds it: `locked`). A device or FIFO output gets nothing written beside it: its
    parts live in a temporary folder for this run only (no resume)."""
    if output.exists() and not output.is_file():
        with tempfile.TemporaryDirectory(prefix="rtvox-parts-") as tmp:
            yield Path(tmp) / (output.name + PARTS_SUFFIX)
        return
    with contextlib.nullcontext() if locked else output_lock(output):
        yield output.with_name(output.name + PARTS_SUFFIX)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _speak_segments(
    synth: Synthesizer,
    segments: list[str],
    fronts: list[FrontendResult],
    output: Path,
    fmt: str,
    base: SynthesisRequest,
    parts: Path,
    fingerprint: str,
    max_batch: int,
    progress: ProgressFn | None,
    write_progress: ProgressFn | None,
) -> float:
    manifest_path = parts / MANIFEST
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("fingerprint") != fingerprint:  # another text or settings: old parts are useless
            shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    if not manifest_path.is_file():
        data = {"fingerprint": fingerprint, "segments": len(segments), "output": output.name}
        atomic_write_bytes(manifest_path, json.dumps(data).encode())

    def part(i: int) -> Path:
        return parts / f"segment-{i:06d}.npy"

    done = sum(part(i).is_file() for i in range(len(segments)))
    if progress is not None:
        progress(done, len(segments))
    # A chunk's audio depends, in float rounding, on the batch it shares, so the windows (one batch each: parts are
    # saved often) are drawn from the whole document, never from what is left to do: a resumed run batches every
    # segment as an uninterrupted run does and writes the same file. A window a kill split between its part writes
    # is synthesized again whole; only its missing parts are written.
    for window in _windows([len(front.chunks) for front in fronts], max_batch):
        if all(part(i).is_file() for i in window):
            continue
        requests = [replace(base, text=segments[i]) for i in window]
        whole = sum(len(fronts[i].chunks) for i in window) // max_batch + 1  # the window is not cut again
        results = synthesize_many(
            synth, requests, max_batch=max_batch, window_batches=whole, fronts=[fronts[i] for i in window]
        )
        for i, result in zip(window, results, strict=True):
            if part(i).is_file():
                continue
            buffer = io.BytesIO()
            np.save(buffer, result.audio.astype(np.float32))
            atomic_write_bytes(part(i), buffer.getvalue())  # a segment is either whole on disk or absent
            done += 1
            if progress is not None:
                progress(done, len(segments))
    samples = _write_parts(output, fmt, [part(i) for i in range(len(segments))], write_progress)
    shutil.rmtree(parts)  # only once the output is whole
    return samples / SAMPLE_RATE


def _windows(chunks: Sequence[int], max_batch: int) -> list[list[int]]:
    """Segment indices grouped in order into windows of at least `max_batch` chunks (the last may have fewer): the
    windows `synthesize_many` with `window_batches=1` forms over the whole document."""
    windows: list[list[int]] = [[]]
    total = 0
    for i, n in enumerate(chunks):
        if total >= max_batch:
            windows.append([])
            total = 0
        windows[-1].append(i)
        total += n
    return [w for w in windows if w]


def _write_parts(output: Path, fmt: str, parts: list[Path], progress: ProgressFn | None) -> int:
    """Encode the parts into `output`, one loaded at a time; returns the samples written."""
    from rtvox.audio.encode import audio_file_writer

    if progress is not None:
        progress(0, len(parts))
    with audio_file_writer(output, SAMPLE_RATE, fmt) as out:
        for i, part in enumerate(parts):
            out.write(np.load(part))
            if progress is not None:
                progress(i + 1, len(parts))
    return out.samples


def speak_file(
    synth: Synthesizer,
    text: str,
    output: Path,
    fmt: str,
    settings: dict[str, Any],
    emotion_ref: Path | None,
    *,
    locked: bool = False,
) -> float:
    """`rtvox speak @file`: speak_document with the CLI's settings; progress bars on stderr (synthesizing, then
    writing <fmt>). `locked`: the CLI holds `output_lock(output)`, taken before the model loaded."""
    from tqdm import tqdm

    kept = {k: v for k, v in settings.items() if k not in ("max_chars", "duration")}
    ref = None if emotion_ref is None else synth.load_reference(emotion_ref)
    base = SynthesisRequest(text="", emotion_ref=ref, **kept)
    quiet = len(text) < PROGRESS_MIN_CHARS
    with contextlib.ExitStack() as bars:

        def bar_progress(desc: str) -> ProgressFn:
            bar = None

            def progress(done: int, total: int) -> None:
                nonlocal bar
                if bar is None:  # opened at its stage's first report: the writing bar under the finished one
                    bar = bars.enter_context(tqdm(desc=desc, unit="segment", file=sys.stderr, disable=quiet))
                bar.total, bar.n = total, done
                bar.refresh()

            return progress

        def warn(message: str) -> None:  # text left out (a script rtvox cannot read): said, as inline speak does
            tqdm.write(f"warning: not spoken: {message}", file=sys.stderr)

        return speak_document(
            synth,
            text,
            output,
            fmt,
            base,
            progress=bar_progress("synthesizing"),
            warn=warn,
            write_progress=bar_progress(f"writing {fmt}"),
            locked=locked,
        )
