"""The corpus manifest: one JSON object per line, one line per utterance, shared by the synthetic builder and
the importers of real datasets. Paths are relative to the manifest's folder, so a corpus folder can be moved
(e.g. copied to the GPU machine) as a whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from recipes.corpus.audio import SAMPLE_RATE

SPLITS = ("train", "val", "heldout-teacher")
MANIFEST_NAME = "manifest.jsonl"


@dataclass
class Record:
    """One utterance. Fields marked (synthetic) are empty for imported real data."""

    id: str  # unique in the manifest; also the wav's stem
    path: str  # wav path relative to the manifest's folder (24 kHz mono 16-bit for synthetic data)
    text: str  # as written: digits, symbols, mixed scripts (what a user types)
    lang: str  # "zh", "en" or "mixed"
    speaker: str  # speaker name, unique across datasets (importers prefix the dataset name)
    emotion: str  # one of rtvox.constants.EMOTIONS; "neutral" for imported data
    duration_s: float
    split: str  # "train", "val" or "heldout-teacher" (speakers the emotion classifier never trains on)
    spoken: str = ""  # verbalized text actually read (numbers, dates in words); equals text when nothing to expand
    base_teacher: str = ""  # teacher voice the speaker is built on; "real:<dataset>" for imported data
    teachers: list[str] = field(default_factory=list)  # (synthetic) teacher that spoke each language segment
    transform: dict[str, Any] = field(default_factory=dict)  # (synthetic) speaker/emotion/conversion parameters
    category: str = ""  # text category: everyday, polyphone, number, date, time, currency, long, compose, ...
    phones: list[str | None] = field(default_factory=list)  # teacher phone string per segment (pinyin, IPA)
    sample_rate: int = SAMPLE_RATE
    index: int = -1  # (synthetic) position in the seeded plan

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown manifest field(s) {sorted(unknown)}; update recipes/corpus/manifest.py")
        return cls(**data)


def read_manifest(path: Path) -> Iterator[Record]:
    """Yield records; a torn last line (the builder was killed mid-write) is skipped, anything else raises."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise ValueError(f"{path}:{number} is not JSON; fix or delete that line") from None
        yield Record.from_dict(data)


class ManifestWriter:
    """Append-only writer; each line is flushed and fsynced: a crash loses at most the line being written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            with path.open("ab") as fh:  # terminate a torn line so the next record starts cleanly
                fh.write(b"\n")
        self._fh = path.open("a", encoding="utf-8")

    def write(self, record: Record) -> None:
        self._fh.write(record.to_json() + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> ManifestWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_manifest(path: Path, records: Iterable[Record]) -> None:
    """Write a whole manifest atomically (importers)."""
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(r.to_json() + "\n")
    os.replace(tmp, path)


def completed(manifest: Path) -> dict[str, Record]:
    """Records whose wav is present: what a resumed build may skip (last line wins for repeated ids)."""
    root = manifest.parent
    return {r.id: r for r in read_manifest(manifest) if (root / r.path).exists()}
