"""A folder that is not a packed dataset is bad input named as such, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtvox.errors import InputError
from rtvox.training.data import PackInfo, load_acoustic


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "is not a packed dataset (no pack.json)"),
        ("{}", "lacks 'speakers'"),
        ('{"speakers": ["a"], "emotions": ["neutral"], "mel_range": [0], "f0_range": [1, 2]}', "is not valid"),
        ("{not json", "is not valid"),
    ],
)
def test_broken_pack_json_is_named(tmp_path: Path, content: str | None, needle: str) -> None:
    if content is not None:
        (tmp_path / "pack.json").write_text(content)
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_acoustic(tmp_path)


def test_a_missing_data_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        PackInfo.load(tmp_path / "nope" / "pack.json")
