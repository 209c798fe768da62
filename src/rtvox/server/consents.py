"""Consent recordings for cloned voices (OpenAI's `/v1/audio/voice_consents`): the speaker's recorded consent,
kept beside the clones (one JSON record and the recording's bytes per consent, each written atomically, so they
survive restarts and are shared by server workers on one clones folder). A clone may name one by its id."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from rtvox.fsutil import atomic_write_bytes
from rtvox.server.errors import APIError
from rtvox.server.schemas import CONSENT_ID_PREFIX, VoiceConsent

RECORD_SUFFIX = ".consent.json"
AUDIO_SUFFIX = ".consent.audio"


class ConsentStore:
    """Owns the consents folder: create, read, rename, list and delete consent records."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def create(self, name: str, language: str, recording: bytes) -> VoiceConsent:
        consent = VoiceConsent(
            id=CONSENT_ID_PREFIX + secrets.token_hex(8), name=name, language=language, created_at=int(time.time())
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.folder / f"{consent.id}{AUDIO_SUFFIX}", recording)  # the record last: never dangling
        self._write(consent)
        return consent

    def get(self, consent_id: str) -> VoiceConsent:
        path = self.folder / f"{consent_id}{RECORD_SUFFIX}"  # ids are checked against CONSENT_PATTERN by the routes
        try:
            return VoiceConsent.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise APIError(
                404, f"no voice consent {consent_id!r}", param="consent_id", code="consent_not_found"
            ) from None

    def exists(self, consent_id: str) -> bool:
        return (self.folder / f"{consent_id}{RECORD_SUFFIX}").is_file()

    def list(self) -> list[VoiceConsent]:
        """Every readable record, oldest first (ties by id): the order `after` pages through."""
        out = []
        for path in self.folder.glob(f"*{RECORD_SUFFIX}") if self.folder.is_dir() else ():
            try:
                out.append(VoiceConsent.model_validate(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue  # half-deleted or foreign: not listed
        return sorted(out, key=lambda c: (c.created_at, c.id))

    def rename(self, consent_id: str, name: str) -> VoiceConsent:
        consent = self.get(consent_id).model_copy(update={"name": name})
        self._write(consent)
        return consent

    def delete(self, consent_id: str) -> None:
        self.get(consent_id)  # 404 for an unknown id
        (self.folder / f"{consent_id}{RECORD_SUFFIX}").unlink(missing_ok=True)
        (self.folder / f"{consent_id}{AUDIO_SUFFIX}").unlink(missing_ok=True)

    def _write(self, consent: VoiceConsent) -> None:
        atomic_write_bytes(self.folder / f"{consent.id}{RECORD_SUFFIX}", consent.model_dump_json().encode())
