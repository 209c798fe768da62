"""Voices: the model's built-in speakers plus clones made from reference clips, persisted on disk."""

from __future__ import annotations

import builtins
import json
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rtvox.errors import InputError, VoiceNotFoundError
from rtvox.fsutil import atomic_write_bytes
from rtvox.runtime.types import Voice

# Names become file names: letters, digits, '-' and '_' only, so no request can reach outside the store.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
CLONE_SUFFIX = ".voice.json"
# OpenAI's voice names with the gender they sound as ("neutral" ones may map to any built-in): the HTTP API maps
# them onto built-ins, so no clone may take one (nor a built-in's name), from the API or the CLI alike.
OPENAI_VOICES: tuple[tuple[str, str], ...] = (
    ("alloy", "neutral"), ("ash", "male"), ("ballad", "male"), ("coral", "female"), ("echo", "male"),
    ("fable", "neutral"), ("onyx", "male"), ("nova", "female"), ("sage", "female"), ("shimmer", "female"),
    ("verse", "male"), ("marin", "female"), ("cedar", "male"),
)  # fmt: skip


def default_voices_dir() -> Path:
    """Where cloned voices live: $RTVOX_VOICES_DIR, else $RTVOX_HOME/voices, else ~/.local/share/rtvox/voices."""
    if env := os.environ.get("RTVOX_VOICES_DIR"):
        return Path(env)
    home = os.environ.get("RTVOX_HOME") or os.path.join(Path.home(), ".local", "share", "rtvox")
    return Path(home) / "voices"


def clone_payload(voice: Voice) -> dict[str, Any]:
    """A clone as JSON (its file in the store, its entry in a shared Redis table); floats exact, since the
    embedding and spectrum key caches."""
    payload: dict[str, Any] = {
        "name": voice.name,
        "embedding": [float(x) for x in voice.embedding],
        "language": voice.language,
        "gender": voice.gender,
        "description": voice.description,
    }
    if voice.spectrum is not None:
        payload["spectrum"] = [float(x) for x in voice.spectrum]
    return payload


def clone_from_payload(data: dict[str, Any]) -> Voice:
    """The clone `clone_payload` wrote; KeyError, TypeError or ValueError (InputError included) when malformed."""
    spectrum = data.get("spectrum")
    return Voice(
        name=validate_voice_name(data["name"]),
        embedding=np.asarray(data["embedding"], dtype=np.float32),
        language=str(data.get("language", "")),
        gender=str(data.get("gender", "unknown")),
        description=str(data.get("description", "")),
        builtin=False,
        spectrum=None if spectrum is None else np.asarray(spectrum, np.float32),
    )


def validate_voice_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(
            f"invalid voice name {name!r}: use 1-64 letters, digits, '-' or '_', starting with a letter or digit",
            param="voice",
        )
    return name


class VoiceStore:
    """Owns the voice table: read-only built-ins and a directory of clones (one JSON file per clone).

    Clone files are written atomically, so a crash never leaves a half-written voice behind.
    """

    def __init__(self, builtins: Iterable[Voice], clones_dir: str | os.PathLike[str] | None = None) -> None:
        self._builtins = {v.name: v for v in builtins}
        self.clones_dir = Path(clones_dir) if clones_dir is not None else default_voices_dir()
        self._clones: dict[str, Voice] = {}
        self._seen: int | None = None  # the clones folder's mtime when last read
        self._refresh()

    def _refresh(self) -> None:
        """Re-read the clones folder when it changed (another process — the CLI, a second server — added or
        removed a clone there): one stat per lookup, a rescan only on change."""
        try:
            stamp: int | None = self.clones_dir.stat().st_mtime_ns
        except OSError:
            stamp = None
        if stamp != self._seen:
            self._seen = stamp
            self._clones = self._load_clones()

    def _load_clones(self) -> dict[str, Voice]:
        clones: dict[str, Voice] = {}
        if not self.clones_dir.is_dir():
            return clones
        for path in sorted(self.clones_dir.glob(f"*{CLONE_SUFFIX}")):
            try:
                voice = clone_from_payload(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # One corrupt file must not take the whole store down; it stays on disk for inspection.
                warnings.warn(f"skipping unreadable voice file {path}: {exc}", stacklevel=2)
                continue
            clones[voice.name] = voice
        return clones

    @property
    def builtin_names(self) -> tuple[str, ...]:
        return tuple(self._builtins)

    def list(self) -> list[Voice]:
        self._refresh()
        return [*self._builtins.values(), *self._clones.values()]

    def get(self, name: str) -> Voice:
        """A voice by name or id, else the one clone whose label (the name given at an HTTP upload) is `name`."""
        if name in self._builtins:
            return self._builtins[name]
        self._refresh()
        if name in self._clones:
            return self._clones[name]
        labelled = self._labelled(name)
        if len(labelled) == 1:
            return labelled[0]
        if labelled:
            ids = ", ".join(sorted(v.name for v in labelled))
            raise InputError(f"{len(labelled)} cloned voices are named {name!r} ({ids}); give one's id", param="voice")
        known = ", ".join(sorted([*self._builtins, *self._clones])) or "(none)"
        raise VoiceNotFoundError(f"unknown voice {name!r}; known voices: {known}", param="voice")

    def has(self, name: str) -> bool:
        """Whether `name` is a built-in's name or a clone's id (labels not consulted)."""
        if name in self._builtins:
            return True
        self._refresh()
        return name in self._clones

    def labelled(self, label: str) -> builtins.list[Voice]:
        """Clones uploaded under `label` (matched in memory, never as a path; an empty label matches none)."""
        self._refresh()
        return self._labelled(label)

    def _labelled(self, label: str) -> builtins.list[Voice]:
        if not label.strip():
            return []
        return [v for v in self._clones.values() if v.description == label]

    def refuse_reserved(self, name: str) -> None:
        """InputError if `name` is a built-in's or an OpenAI voice name (any case): no clone may take one."""
        taken = {n.lower() for n in self._builtins} | {n for n, _ in OPENAI_VOICES}
        if name.strip().lower() in taken:
            raise InputError(
                f"{name!r} is a built-in or OpenAI voice name, so a request by that name would not reach this "
                "clone; choose another name",
                param="name",
            )

    def add(self, voice: Voice) -> Voice:
        """Persist a clone. Built-in names cannot be shadowed; an existing clone of that name is replaced."""
        validate_voice_name(voice.name)
        self.refuse_reserved(voice.name)
        clone = Voice(
            name=voice.name,
            embedding=voice.embedding,
            language=voice.language,
            gender=voice.gender,
            description=voice.description,
            builtin=False,
            spectrum=voice.spectrum,
        )
        self.clones_dir.mkdir(parents=True, exist_ok=True)
        payload = clone_payload(clone)
        atomic_write_bytes(self.clones_dir / f"{clone.name}{CLONE_SUFFIX}", json.dumps(payload).encode("utf-8"))
        self._clones[clone.name] = clone
        return clone

    def remove(self, name: str) -> None:
        if name not in self._clones and self.labelled(name):
            name = self.get(name).name  # the one clone uploaded under that label (several: get says which ids)
        validate_voice_name(name)
        if name in self._builtins:
            raise InputError(f"{name!r} is a built-in voice and cannot be removed", param="voice")
        if name not in self._clones:
            raise VoiceNotFoundError(f"no cloned voice named {name!r}", param="voice")
        (self.clones_dir / f"{name}{CLONE_SUFFIX}").unlink(missing_ok=True)
        self._clones.pop(name, None)
