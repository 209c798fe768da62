"""`rtvox build` and `rtvox bench` through the CLI on a tiny model (eager only: compiling is tested elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtvox.models.bundle import ModelBundle


@pytest.fixture()
def model_dir(bundle: ModelBundle) -> Path:
    assert bundle.path is not None
    return bundle.path


def test_build_eager_prints_each_engine(model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rtvox.cli import app

    monkeypatch.setenv("RTVOX_ENGINE_CACHE", str(tmp_path))
    result = CliRunner().invoke(app, ["build", "--backend", "eager", "--device", "cpu", "--model", str(model_dir)])
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    assert set(built) == {"acoustic_encode", "acoustic_decode", "vocoder"}
    assert {v["backend"] for v in built.values()} == {"eager"}


def test_bench_writes_json_table_and_chart(model_dir: Path, tmp_path: Path) -> None:
    from rtvox.engines.bench_run import run_bench

    texts = {"short": ("Good morning.", 1.0), "medium": ("See you at the station tomorrow.", 2.0)}
    report = run_bench(
        model_dir, [("eager", "float32")], tmp_path, repeats=2, batches=(1, 2), profile="ci", texts=texts
    )
    row = report["results"][0]
    assert row["texts"]["short"]["rtf"] > 0 and row["throughput"]["2"]["audio_s_per_s"] > 0
    assert report["costs_10s"][2]["module"] == "vocoder" and report["costs_10s"][2]["flops"] > 0
    assert (tmp_path / "bench.json").is_file() and "| eager | float32 |" in (tmp_path / "bench.md").read_text()


@pytest.mark.parametrize(("variants", "needle"), [("nope", "unknown backend 'nope'"), ("eager:int4", "unknown dtype")])
def test_bench_rejects_unknown_variants_before_running(tmp_path: Path, variants: str, needle: str) -> None:
    from rtvox.cli import app

    # a missing model: the variants are checked first, so this is not the error
    args = ["bench", "--variants", variants, "-o", str(tmp_path / "b"), "--model", str(tmp_path / "none")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and needle in result.output
    assert not (tmp_path / "b").exists()


def test_parse_variants_defaults_to_float32() -> None:
    from rtvox.engines.cli_support import parse_variants

    assert parse_variants("eager, onnx:int8,auto") == [("eager", "float32"), ("onnx", "int8"), ("auto", "float32")]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["export", "-o", "FILE"], "is a file; give a folder"),
        (["bench", "-o", "/proc/nope"], "cannot write into /proc/nope"),
        (["export", "-o", "OUT", "--modules", ","], "--modules names no module"),
        (["export", "-o", "OUT", "--profile", "bogus"], "unknown shape profile 'bogus'"),
        (["build", "--device", "mps"], "unknown device 'mps'"),
    ],
)
def test_engine_commands_refuse_bad_outputs_and_flags_before_the_model_loads(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    from rtvox.cli import app

    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a in ("FILE", "OUT") else a for a in args]
    result = CliRunner().invoke(app, [*args, "--model", str(tmp_path / "none")])  # no model: never reached
    assert result.exit_code == 2 and needle in result.output, result.output
    assert not (tmp_path / "OUT").exists()  # a refused command leaves no empty folder behind
