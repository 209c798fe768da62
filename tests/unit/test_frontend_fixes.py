"""CLI input the frontend and the eval got wrong: each case once spoke the wrong thing or failed late, with a
traceback or exit status 1, instead of one "error: ..." line and exit status 2 before the model loads."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from rtvox.cli import app

runner = CliRunner()
NO_MODEL = ["--model", "/no/such/model"]  # a command that got past its checks would fail here, with exit 1


def fails(args: list[str], code: int, *needles: str) -> Result:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no exception escaped the command
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and all(n in last for n in needles), result.stderr
    return result


def test_an_at_sign_alone_asks_for_a_file_name(tmp_path: Path) -> None:
    """`rtvox speak @ -o x.wav` spoke the at-sign ("at")."""
    out = tmp_path / "x.wav"
    fails(["speak", "@", "-o", str(out), *NO_MODEL], 2, "no file name after @", "@FILE", "'-' for stdin")
    fails(["phonemize", "@"], 2, "no file name after @")
    assert not out.exists()


def test_an_at_sign_inside_text_is_still_spoken() -> None:
    result = runner.invoke(app, ["phonemize", "--json", "email me @ home"])
    assert result.exit_code == 0, result.output
    assert '"normalized": "email me at home"' in result.stdout


def test_eval_sentence_file_that_is_not_text_is_bad_input(tmp_path: Path) -> None:
    """A binary file was a UnicodeDecodeError traceback; a folder an IsADirectoryError one."""
    binary = tmp_path / "sentences.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81\x9f" * 64)
    out = str(tmp_path / "r.json")
    fails(["eval", "--sets", f"en={binary}", "--out", out, *NO_MODEL], 2, str(binary), "not UTF-8 text")
    fails(["eval", "--sets", f"en={tmp_path}", "--out", out, *NO_MODEL], 2, str(tmp_path), "is a folder")


def test_eval_keep_audio_that_is_a_file_fails_before_the_model_loads(tmp_path: Path) -> None:
    """It failed with "Not a directory", exit 1, when the first clip was written (after ~9 s of loading)."""
    clip = tmp_path / "x.wav"
    clip.write_bytes(b"")
    out = str(tmp_path / "r.json")
    fails(["eval", "--keep-audio", str(clip), "--limit", "1", "--out", out, *NO_MODEL], 2, "--keep-audio", "is a file")
    below = clip / "clips"
    fails(["eval", "--keep-audio", str(below), "--limit", "1", "--out", out, *NO_MODEL], 2, "--keep-audio", "x.wav")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.wav"]
