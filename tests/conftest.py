"""Suite-wide fixtures: no test may touch the user's real voice store."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_voice_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    voices = tmp_path / "voices"
    monkeypatch.setenv("RTVOX_VOICES_DIR", str(voices))
    return voices
