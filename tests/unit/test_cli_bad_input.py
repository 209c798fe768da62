"""The CLI on bad input: one "error: ..." line naming the problem, a non-zero exit, checked before the model loads,
and no output (file or folder) left behind. Each case here once failed otherwise (a traceback, a late or unclear
error, an empty folder, a refused suffix the library reads)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from rtvox.audio import decode_audio
from rtvox.cli import CLI_MAX_CHARS, app
from rtvox.cli_errors import no_empty_folder_left
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE

runner = CliRunner()
NO_MODEL = ["--model", "/no/such/model"]  # a command that got past its checks would fail here, with exit 1


@pytest.fixture(scope="module")
def tiny_model(make_tiny_model: Callable[[str], Path]) -> Path:
    return make_tiny_model("cli-bad-input")


def fails(args: list[str], code: int, *needles: str, stdin: str | None = None) -> Result:
    result = runner.invoke(app, args, input=stdin)
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no exception escaped the command
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and all(n in last for n in needles), result.stderr
    return result


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_serve_on_a_port_in_use_says_so_before_the_model_loads(busy_port: int) -> None:
    """It failed after the model loaded, in uvicorn's log lines, with exit status 3."""
    fails(["serve", "--port", str(busy_port), *NO_MODEL], 2, f"port {busy_port}", "already in use", "--port")


def test_serve_on_an_unknown_host_names_it() -> None:
    fails(["serve", "--host", "no.such.host.invalid", *NO_MODEL], 2, "cannot listen on --host no.such.host.invalid")


@pytest.mark.parametrize("url", ["bogus://:s3cret@x", "redis://:s3cret@x:notaport"])
def test_serve_with_a_malformed_redis_url_is_one_line_without_the_password(url: str) -> None:
    """It was a traceback from deep in the app's start (after the model loaded)."""
    result = fails(["serve", "--redis-url", url, *NO_MODEL], 2, "--redis-url is not a Redis URL")
    assert "s3cret" not in result.output


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_serve_max_upload_must_be_a_positive_number(value: str) -> None:
    """inf was an OverflowError traceback; nan said only "cannot convert float NaN to integer"."""
    fails(["serve", "--max-upload-mb", value, *NO_MODEL], 2, "--max-upload-mb must be a positive number")


@pytest.mark.parametrize(("suffix", "fmt"), [("ogg", "opus"), ("raw", "pcm")])
def test_speak_takes_every_suffix_the_library_reads(tiny_model: Path, tmp_path: Path, suffix: str, fmt: str) -> None:
    """.ogg (Ogg Opus) and .raw (pcm) were refused as "unsupported audio format" though `write_audio` reads them."""
    out = tmp_path / f"out.{suffix}"
    result = runner.invoke(app, ["speak", "Hello, 你好。", "-o", str(out), "--model", str(tiny_model)])
    assert result.exit_code == 0, result.output
    if fmt == "pcm":
        assert out.stat().st_size > 0 and out.stat().st_size % (2 * HOP_LENGTH) == 0
    else:
        wav, sr = decode_audio(out)
        assert sr == SAMPLE_RATE and wav.size > 0 and np.all(np.isfinite(wav))


@pytest.mark.parametrize("command", ["speak", "demo"])
def test_an_unknown_suffix_fails_before_the_model_loads(tmp_path: Path, command: str) -> None:
    """demo found it only after the synthesis."""
    out = tmp_path / "out.xyz"
    text = ["Hello."] if command == "speak" else []
    fails([command, *text, "-o", str(out), *NO_MODEL], 2, "cannot tell the audio format of", "out.xyz")
    assert list(tmp_path.iterdir()) == []


def test_speak_text_over_the_limit_says_how_to_speak_it_before_the_model_loads(tmp_path: Path) -> None:
    """It failed after the model loaded, under an empty progress bar, telling a CLI user to "use offline mode"."""
    out = tmp_path / "out.wav"
    fails(["speak", "-", "-o", str(out), *NO_MODEL], 2, "over the limit", "@FILE", stdin="a" * (CLI_MAX_CHARS + 1))
    assert list(tmp_path.iterdir()) == []


def test_export_and_bench_leave_no_empty_folder_when_they_fail(tiny_model: Path, tmp_path: Path) -> None:
    """The output folder was made before the backend and the model were known good, and stayed behind empty."""
    fails(["export", "-o", str(tmp_path / "a" / "b"), *NO_MODEL], 1, "no model at")
    fails(["export", "-o", str(tmp_path / "ex"), "--backend", "warp", "--model", str(tiny_model)], 2, "onnx or aoti")
    fails(["bench", "-o", str(tmp_path / "bench"), "--repeats", "1", *NO_MODEL], 1, "no model at")
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"  # a folder that was there before stays
    kept.mkdir()
    fails(["export", "-o", str(kept), *NO_MODEL], 1, "no model at")
    assert kept.is_dir()


def test_no_empty_folder_left_keeps_what_was_written(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "out"
    with pytest.raises(RuntimeError), no_empty_folder_left(folder):
        folder.mkdir(parents=True)
        (folder / "partial.json").write_text("{}")
        raise RuntimeError("failed late")
    assert (folder / "partial.json").is_file()


def test_interrupted_document_says_where_its_parts_wait(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C left OUTPUT.parts/ behind without a word (exit 130, nothing printed)."""
    import rtvox.runtime.offline as offline

    def interrupted(_synth: object, _text: str, output: Path, *_args: object, **_kwargs: object) -> float:
        output.with_name(output.name + offline.PARTS_SUFFIX).mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(offline, "speak_file", interrupted)
    doc = tmp_path / "book.txt"
    doc.write_text("Hello there.", encoding="utf-8")
    out = tmp_path / "book.wav"
    result = runner.invoke(app, ["speak", f"@{doc}", "-o", str(out), "--model", str(tiny_model)])
    assert result.exit_code == 130, result.output
    assert f"interrupted: {out} was not written" in result.stderr
    assert "run the same command to resume" in result.stderr and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--speed", "9"], ["--speed must be a number from 0.5 to 2.0", "9.0"]),
        (["--emotion-alpha", "nan"], ["--emotion-alpha must be a number", "nan"]),
        (["--duration", "-1"], ["--duration must be a number"]),
        (["--pitch-scale", "inf"], ["--pitch-scale must be a number"]),
        (["--emotion", "furious"], ["unknown emotion 'furious'", "happy"]),
    ],
)
def test_speak_settings_fail_before_the_model_loads_naming_the_flag(
    tmp_path: Path, flags: list[str], needles: list[str]
) -> None:
    """They were checked only once the model had loaded (seconds later), and named the request's field."""
    out = tmp_path / "x.wav"
    fails(["speak", "hello", "-o", str(out), *flags, *NO_MODEL], 2, *needles)
    assert not out.exists()
