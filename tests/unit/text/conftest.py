"""Shared fixtures for the text frontend tests: one Frontend (jieba's dictionary loads once per session)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rtvox.text import Frontend


@pytest.fixture(scope="session")
def frontend() -> Frontend:
    return Frontend()


@pytest.fixture(scope="session")
def pinyin(frontend: Frontend) -> Callable[[str], list[str]]:
    """Every zh syllable of a text, in order."""

    def read(text: str) -> list[str]:
        return [s for t in frontend.tokenize(text) if t.lang == "zh" and t.pinyin for s in t.pinyin]

    return read
