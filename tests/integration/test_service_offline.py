"""`rtvox speak @book.txt`: the offline document path through the CLI, resumable parts removed at the end."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rtvox.audio import decode_audio
from rtvox.cli import app
from rtvox.constants import SAMPLE_RATE


def test_speak_at_file_writes_the_whole_document(tiny_model: Path, tmp_path: Path) -> None:
    book = tmp_path / "book.txt"
    book.write_text("第一章\n\n今天天气很好，我们去公园散步吧。\nIt was a bright cold day in April.\n" * 20, "utf-8")
    out = tmp_path / "book.mp3"
    result = CliRunner().invoke(
        app, ["speak", f"@{book}", "-o", str(out), "--model", str(tiny_model), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    audio, sr = decode_audio(out.read_bytes())
    assert sr == SAMPLE_RATE and len(audio) > SAMPLE_RATE
    assert not (tmp_path / "book.mp3.parts").exists()
