"""The CLI end to end: real commands, exit codes, files that decode, nothing half-written on errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rtvox.audio import decode_audio
from rtvox.cli import app
from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, SAMPLE_RATE

from .test_cache import RedisServer, needs_server, redis_server  # noqa: F401  (fixture)

DATA = Path(__file__).resolve().parents[1] / "data"
runner = CliRunner()


def rtvox(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtvox", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def test_phonemize_json_through_the_real_entry_point() -> None:
    proc = rtvox("phonemize", "--json", "一个重庆人去银行。")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"normalized", "tokens", "chunks"}
    pinyin = {t["text"]: t["pinyin"] for t in data["tokens"] if t["lang"] == "zh"}
    assert pinyin["重庆"] == ["chong2", "qing4"]
    assert pinyin["银行"] == ["yin2", "hang2"]
    assert pinyin["一个"] == ["yi2", "ge4"]


def test_phonemize_reads_stdin_and_files(tmp_path: Path) -> None:
    proc = rtvox("phonemize", "--json", "-", stdin="还钱")
    tokens = json.loads(proc.stdout)["tokens"]
    assert [p for t in tokens for p in t["pinyin"]] == ["huan2", "qian2"]
    src = tmp_path / "in.txt"
    src.write_text("I have 3 apples.", encoding="utf-8")
    result = runner.invoke(app, ["phonemize", "--json", f"@{src}"])
    assert result.exit_code == 0
    assert "three" in json.loads(result.stdout)["normalized"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["phonemize", ""], "nothing to speak"),
        (["phonemize", "！？"], "nothing to speak"),
        (["phonemize", "@/no/such/file.txt"], "does not exist"),
        (["phonemize", "😀🎉"], "nothing rtvox can speak"),  # it printed an empty line and exit 0
        (["serve", "--log-level", "bogus"], "log level 'bogus'"),
        (["serve", "--workers", "0"], "workers must be 1-64"),
        (["bench", "--batches", "x"], "--batches 'x'"),
        (["bench", "--batches", "0,-1"], "at least 1"),
        (["eval", "--limit", "1", "--out", "/proc/ev.json"], "cannot write /proc/ev.json"),  # before the eval runs
        (
            ["eval", "--emotion", "--judge", "/no/judge", "--limit", "1", "--out", "/tmp/rtvox-ev.json"],
            "no emotion judge",
        ),
        (["bench", "--device", "tpu"], "unknown device 'tpu'"),
    ],
)
def test_phonemize_bad_input_exits_2_with_a_message(args: list[str], needle: str) -> None:
    proc = rtvox(*args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("error:") and needle in proc.stderr  # after any warnings
    assert "Traceback" not in proc.stderr


def test_serve_workers_with_a_bad_model_fails_once_before_any_worker() -> None:
    """A model that would fail in every worker fails in the parent, once, with its message (a worker that died at
    start would be restarted by uvicorn, over and over)."""
    proc = rtvox("serve", "--workers", "2", "--model", "/no/such/model")
    assert proc.returncode == 1
    assert "no model at /no/such/model" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3", "opus", "aac", "pcm"])
def test_speak_writes_every_format(tiny_model: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"out.{fmt}"
    result = runner.invoke(app, ["speak", "你好，world。", "-o", str(out), "--model", str(tiny_model)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    if fmt == "pcm":
        samples = np.frombuffer(data, dtype="<i2")
        assert samples.size > 0 and samples.size % HOP_LENGTH == 0
    else:
        wav, _sr = decode_audio(data)
        assert wav.size > 0 and np.all(np.isfinite(wav))


def test_speak_exact_duration_and_stdin(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "d.wav"
    proc = rtvox("speak", "-", "-o", str(out), "--model", str(tiny_model), "--duration", "1.5", stdin="Hello. 你好。")
    assert proc.returncode == 0, proc.stderr
    wav, sr = decode_audio(out)
    assert sr == SAMPLE_RATE
    assert wav.size == round(1.5 * FRAMES_PER_SECOND) * HOP_LENGTH


def test_speak_names_text_it_leaves_out(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.wav"
    proc = rtvox("speak", "Hello there, Привет.", "-o", str(out), "--model", str(tiny_model))
    assert proc.returncode == 0, proc.stderr
    assert "warning: not spoken" in proc.stderr and "Привет" in proc.stderr
    assert decode_audio(out)[0].size > 0
    assert "warning" not in rtvox("speak", "Hello there.", "-o", str(out), "--model", str(tiny_model)).stderr


def test_speak_with_reference_clip(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "ref.wav"
    args = ["speak", "Hi.", "-o", str(out), "--model", str(tiny_model), "--ref", str(DATA / "speech_en_male_16k.wav")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 44


def test_speak_with_a_reference_clip_from_a_pipe(tiny_model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "clip.fifo"  # as `--ref <(curl ...)` gives it: read once, then drained
    os.mkfifo(fifo)
    out = tmp_path / "ref.wav"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtvox", "speak", "Hi.", "-o", str(out), "--model", str(tiny_model), "--ref", str(fifo)],
        stderr=subprocess.PIPE,
        text=True,
    )
    fifo.write_bytes((DATA / "speech_en_male_16k.wav").read_bytes())
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert out.stat().st_size > 44


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["  "], "nothing to speak"),
        (["你好", "--voice", "nobody"], "unknown voice 'nobody'"),
        (["你好", "--emotion", "bored"], "unknown emotion"),
        (["你好", "--speed", "9"], "speed must be"),
        (["你好", "--duration", "-1"], "duration must be"),
        (["你好", "--format", "xyz"], "unsupported audio format"),
        (["你好", "--ref", "README.md"], "could not decode README.md as audio"),  # the file, not an API field
        (["你好", "--emotion-ref", "README.md"], "could not decode README.md as audio"),
        (["你好", "--ref", "/dev/null"], "reference clip /dev/null is empty"),
        (["你好", "--voice", "anna", "--ref", "README.md"], "either --voice or --ref"),
        (["你好", "--voice", " "], "--voice is empty"),
        (["你好", "--emotion", "happy", "--emotion-ref", "README.md"], "either --emotion or --emotion-ref"),
        (["你好", "--device", "tpu"], "unknown device"),
        (["你好", "--backend", "warp"], "unknown backend"),
    ],
)
def test_speak_bad_input_exits_2_and_writes_nothing(
    tiny_model: Path, tmp_path: Path, extra: list[str], needle: str
) -> None:
    out = tmp_path / "never.wav"
    text, *flags = extra
    proc = rtvox("speak", text, "-o", str(out), "--model", str(tiny_model), *flags)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no output, no temp file left behind


@pytest.mark.parametrize(
    ("where", "needle"),
    [
        ("missing/out.wav", "output folder"),
        ("", "is a folder"),
        ("/proc/out.wav", "cannot write"),
        ("a.wav/out.wav", "is a file, not a folder"),
    ],
)
def test_speak_unwritable_output_fails_before_synthesis(tmp_path: Path, where: str, needle: str) -> None:
    out = Path(where) if where.startswith("/") else tmp_path / where if where else tmp_path
    if where.startswith("a.wav"):
        (tmp_path / "a.wav").write_bytes(b"")  # an existing file where a folder should be
    # a model that does not exist: the path is checked before the model loads, or this would fail with exit 1
    proc = rtvox("speak", "你好", "-o", str(out), "--model", str(tmp_path / "nope"))
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and str(out.parent if where else out) in proc.stderr
    assert "Traceback" not in proc.stderr and ".tmp" not in proc.stderr  # names the output, not a temp file
    assert [p.name for p in tmp_path.iterdir()] == (["a.wav"] if where.startswith("a.wav") else [])


def test_demo_into_a_missing_folder_is_one_message(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "-o", str(tmp_path / "no" / "demo.wav")])
    assert result.exit_code == 2
    assert "output folder" in result.output and "does not exist" in result.output


def test_an_os_error_in_a_command_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from rtvox.cli_errors import one_message

    with pytest.raises(typer.Exit) as caught, one_message():
        (tmp_path / "gone" / "x.json").write_text("{}")
    assert caught.value.exit_code == 1
    assert capsys.readouterr().err == f"error: No such file or directory: {tmp_path / 'gone' / 'x.json'}\n"


def test_missing_model_is_an_operator_error(tmp_path: Path) -> None:
    proc = rtvox("speak", "你好", "-o", str(tmp_path / "x.wav"), "--model", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert "config.json missing" in proc.stderr


def test_voices_add_list_rm(tiny_model: Path) -> None:
    model = ["--model", str(tiny_model)]
    added = runner.invoke(app, ["voices", "add", "alice", str(DATA / "speech_en_female_16k.wav"), *model])
    assert added.exit_code == 0 and added.output.startswith("added voice alice"), added.output
    again = runner.invoke(app, ["voices", "add", "alice", str(DATA / "speech_en_male_16k.wav"), *model])
    assert again.exit_code == 0 and again.output.startswith("replaced voice alice"), again.output
    listed = runner.invoke(app, ["voices", "list", "--json", *model])
    rows = json.loads(listed.stdout)
    assert {"name": "alice", "builtin": False} in [{k: r[k] for k in ("name", "builtin")} for r in rows]
    assert runner.invoke(app, ["voices", "rm", "alice", *model]).exit_code == 0
    gone = runner.invoke(app, ["voices", "rm", "alice", *model])
    assert gone.exit_code == 2 and "no cloned voice" in gone.output
    assert runner.invoke(app, ["voices", "rm", "anna", *model]).exit_code == 2
    for taken in ("alloy", "Anna"):  # OpenAI's names and the built-ins' (any case) stay theirs
        refused = runner.invoke(app, ["voices", "add", taken, str(DATA / "speech_en_female_16k.wav"), *model])
        assert refused.exit_code == 2 and "choose another name" in refused.output


def test_speak_to_stdout_and_to_a_device(tiny_model: Path) -> None:
    """`-o -` writes the encoded audio to stdout (messages stay on stderr); a device such as /dev/null is written
    in place, never renamed over; standard input that is not UTF-8 is refused by name."""
    proc = subprocess.run(
        [sys.executable, "-m", "rtvox", "speak", "Hello.", "-o", "-", "--format", "flac", "--model", str(tiny_model)],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    wav, sr = decode_audio(proc.stdout)
    assert sr == SAMPLE_RATE and wav.size > 0 and b"to stdout" in proc.stderr
    proc2 = rtvox("speak", "Hello.", "-o", "/dev/null", "--model", str(tiny_model))
    assert proc2.returncode == 0, proc2.stderr
    assert Path("/dev/null").is_char_device()
    bad = subprocess.run(
        [sys.executable, "-m", "rtvox", "speak", "-", "-o", "/dev/null", "--model", str(tiny_model)],
        input=b"caf\xe9",
        capture_output=True,
        timeout=300,
    )
    assert bad.returncode == 2 and b"standard input is not UTF-8 text" in bad.stderr


def test_a_second_run_of_the_same_document_is_refused_before_the_model_loads(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    import rtvox.runtime

    book, out = tmp_path / "book.txt", tmp_path / "book.wav"
    book.write_text("One sentence.\nAnother one.\n", encoding="utf-8")

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model loaded before the output's lock was asked for")

    monkeypatch.setattr(rtvox.runtime, "Synthesizer", no_model)
    with open(tmp_path / ".book.wav.lock", "w") as held:  # another run holds this output
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = runner.invoke(app, ["speak", f"@{book}", "-o", str(out), "--model", str(tiny_model)])
    assert result.exit_code != 0
    assert f"another rtvox run is writing {out}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [".book.wav.lock", "book.txt"]  # the holder's file only
    monkeypatch.undo()
    result = runner.invoke(app, ["speak", f"@{book}", "-o", str(out), "--model", str(tiny_model)])
    assert result.exit_code == 0, result.output  # once free, the same command runs and leaves no lock behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.txt", "book.wav"]
    wav, sr = decode_audio(out)
    assert sr == SAMPLE_RATE and wav.size > 0


@needs_server
def test_voices_rm_with_a_redis_url_deletes_the_shared_clone_too(
    tiny_model: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """`voices rm --redis-url` does what DELETE /v1/audio/voices/{id} does to the shared table (the entry gone, a
    tombstone for the servers holding a copy, a note for later catch-ups); an id only Redis holds is deleted there;
    a Redis that does not answer is an error that says the local delete happened."""
    model = ["--model", str(tiny_model)]
    clones = Path(os.environ["RTVOX_VOICES_DIR"])
    table = redis_server.client()
    added = runner.invoke(
        app, ["voices", "add", "voice_00000000000000aa", str(DATA / "speech_en_female_16k.wav"), *model]
    )
    assert added.exit_code == 0, added.output
    table.hset("rtvox:voices", mapping={"voice_00000000000000aa": "{}", "voice_00000000000000bb": "{}"})
    url = ["--redis-url", redis_server.url]
    done = runner.invoke(app, ["voices", "rm", "voice_00000000000000aa", *model, *url])
    assert done.exit_code == 0 and "and from Redis" in done.output, done.output
    assert not table.hexists("rtvox:voices", "voice_00000000000000aa")
    assert table.zscore("rtvox:voices:deleted", "voice_00000000000000aa") is not None
    assert (clones / ".deleted" / "voice_00000000000000aa").is_file()
    remote = runner.invoke(app, ["voices", "rm", "voice_00000000000000bb", *model, *url])  # not in this folder
    assert remote.exit_code == 0 and not table.hexists("rtvox:voices", "voice_00000000000000bb"), remote.output
    nowhere = runner.invoke(app, ["voices", "rm", "voice_00000000000000cc", *model, *url])
    assert nowhere.exit_code == 2 and "here or in Redis" in nowhere.output, nowhere.output
    builtin = runner.invoke(app, ["voices", "rm", "anna", *model, *url])
    assert builtin.exit_code == 2 and "built-in" in builtin.output, builtin.output
    runner.invoke(app, ["voices", "add", "voice_00000000000000dd", str(DATA / "speech_en_male_16k.wav"), *model])
    redis_server.stop()
    down = runner.invoke(app, ["voices", "rm", "voice_00000000000000dd", *model, *url])
    assert down.exit_code == 1, down.output
    assert "removed voice voice_00000000000000dd here, but not from the shared table" in down.output
    assert "did not answer" in down.output
    assert not (clones / "voice_00000000000000dd.voice.json").exists()
    assert (clones / ".deleted" / "voice_00000000000000dd").is_file()  # sent by a server's next catch-up
