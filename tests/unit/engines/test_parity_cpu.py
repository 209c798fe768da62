"""Each CPU backend against eager fp32 on fresh random inputs of several lengths and batch sizes.

CI runs onnx (all pipeline modules) and aoti (vocoder); RTVOX_TEST_SLOW_ENGINES=1 adds aoti for every module,
inductor-cpu and the emotion encoder (each compile costs 10-30 s on two cores).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from rtvox.engines import build_engine
from rtvox.engines.base import BuildOptions, Engine
from rtvox.engines.build import build_engines, module_fn
from rtvox.engines.quality import log_mel_l1, random_inputs, run_pipeline
from rtvox.engines.shapes import ShapeProfile
from rtvox.models.bundle import ModelBundle

from .conftest import CPU

SLOW = os.environ.get("RTVOX_TEST_SLOW_ENGINES") == "1"
slow = pytest.mark.skipif(not SLOW, reason="compiles several graphs; set RTVOX_TEST_SLOW_ENGINES=1")
# (row lengths in phonemes, exact frame targets): one short row, one long row, a ragged batch of two.
CASES = [([5], [40]), ([37], [0]), ([9, 60], [70, 250])]
# Emotion prosody rows (pitch shift, range, energy shift, duration), none the identity: the prior's arithmetic
# is part of the compiled graph and must match eager too.
PROSODY = [(0.6, 1.3, 0.2, 0.9), (-0.4, 0.65, -0.5, 1.2)]


def _inputs(bundle: ModelBundle, case: int, seed: int) -> tuple[torch.Tensor, ...]:
    lengths, targets = CASES[case]
    cfg = bundle.config.acoustic
    inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=seed).tensors(CPU)
    prosody = torch.tensor([PROSODY[(case + row) % len(PROSODY)] for row in range(len(lengths))])
    return (*inputs[:-1], prosody)


def _eager(bundle: ModelBundle) -> dict[str, Engine]:
    return build_engines(bundle, "eager", CPU)


def check_modules(bundle: ModelBundle, engines: dict[str, Engine], atol: float, seed: int) -> None:
    eager = _eager(bundle)
    for case in range(len(CASES)):
        inputs = _inputs(bundle, case, seed + case)
        hidden, durations = eager["acoustic_encode"](*inputs)
        if "acoustic_encode" in engines:
            got_hidden, got_durations = engines["acoustic_encode"](*inputs)
            assert torch.equal(got_durations, durations)
            torch.testing.assert_close(got_hidden, hidden, rtol=0, atol=atol)
        (mel,) = eager["acoustic_decode"](hidden, durations)
        if "acoustic_decode" in engines:
            (got_mel,) = engines["acoustic_decode"](hidden, durations)  # the Synthesizer's 2-input call
            torch.testing.assert_close(got_mel, mel, rtol=0, atol=atol)
        if "vocoder" in engines:
            (wav,) = eager["vocoder"](mel)
            (got_wav,) = engines["vocoder"](mel)
            torch.testing.assert_close(got_wav, wav, rtol=0, atol=atol)


@pytest.fixture(scope="module")
def onnx_engines(bundle: ModelBundle, ci_options: BuildOptions) -> dict[str, Engine]:
    pytest.importorskip("onnxruntime")
    return build_engines(bundle, "onnx", CPU, torch.float32, options=ci_options)


def test_onnx_matches_eager_per_module(bundle: ModelBundle, onnx_engines: dict[str, Engine]) -> None:
    check_modules(bundle, onnx_engines, atol=1e-4, seed=11)
    info = onnx_engines["vocoder"].info  # type: ignore[attr-defined]
    assert info["opset"] >= 17 and info["providers"] == ["CPUExecutionProvider"]


def test_inputs_past_the_shape_profile_are_served_by_eager_fp32_not_refused(
    bundle: ModelBundle, onnx_engines: dict[str, Engine]
) -> None:
    """A request whose chunk is longer than the engine's profile (the ci profile ends at 256 frames and 64
    phonemes; the serve profile at 4096 frames: a 50-s target duration on one sentence) gets eager's answer."""
    eager = _eager(bundle)
    cfg = bundle.config.acoustic
    inputs = random_inputs([80], cfg.cond_dim, cfg.vocab_size, [400], seed=21).tensors(CPU)  # 80 > 64, 400 > 256
    hidden, durations = eager["acoustic_encode"](*inputs)
    got_hidden, got_durations = onnx_engines["acoustic_encode"](*inputs)
    assert torch.equal(got_durations, durations) and int(durations.sum()) == 400
    torch.testing.assert_close(got_hidden, hidden, rtol=0, atol=0)  # eager fp32 itself
    (mel,) = eager["acoustic_decode"](hidden, durations)
    (got_mel,) = onnx_engines["acoustic_decode"](hidden, durations)
    torch.testing.assert_close(got_mel, mel, rtol=0, atol=0)
    (wav,) = eager["vocoder"](mel)
    torch.testing.assert_close(onnx_engines["vocoder"](mel)[0], wav, rtol=0, atol=0)
    # inside the profile the compiled engine itself answers again
    short = random_inputs([9], cfg.cond_dim, cfg.vocab_size, [70], seed=22).tensors(CPU)
    assert onnx_engines["acoustic_encode"](*short)[1].sum() == 70


def test_onnx_end_to_end_log_mel(bundle: ModelBundle, onnx_engines: dict[str, Engine]) -> None:
    cfg = bundle.config.acoustic
    for seed, (lengths, targets) in enumerate(CASES):
        inputs = random_inputs(lengths, cfg.cond_dim, cfg.vocab_size, targets, seed=100 + seed)
        wav, frames = run_pipeline(onnx_engines, inputs, CPU)
        ref, ref_frames = run_pipeline(_eager(bundle), inputs, CPU)
        assert torch.equal(frames, ref_frames)
        assert log_mel_l1(wav, ref) < 1e-3


def test_aoti_vocoder_matches_eager(bundle: ModelBundle, ci_options: BuildOptions) -> None:
    engine = build_engine("aoti", "vocoder", bundle.vocoder, CPU, torch.float32, ci_options)
    assert engine.info["load_path"] == "aoti_load_package"  # type: ignore[attr-defined]
    check_modules(bundle, {"vocoder": engine}, atol=1e-4, seed=21)


def test_compiled_engine_past_its_profile_answers_as_eager_and_refuses_without_an_overflow(
    bundle: ModelBundle, ci_options: BuildOptions
) -> None:
    mel = torch.randn(1, 80, ci_options.profile.frames.max + 1, generator=torch.Generator().manual_seed(3)) - 4.0
    engine = build_engine("aoti", "vocoder", bundle.vocoder, CPU, torch.float32, ci_options)
    want = build_engine("eager", "vocoder", bundle.vocoder, CPU, torch.float32)(mel)[0]
    torch.testing.assert_close(engine(mel)[0], want, rtol=0, atol=0)  # build_engine gave it an eager overflow
    bare = build_engine("aoti", "vocoder", bundle.vocoder, CPU, torch.float32, ci_options)  # from the cache
    bare.overflow = None  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="exceeds the engine's shape profile"):
        bare(mel)


@slow
def test_aoti_all_modules_match_eager(bundle: ModelBundle, ci_options: BuildOptions) -> None:
    engines = build_engines(bundle, "aoti", CPU, torch.float32, options=ci_options)
    check_modules(bundle, engines, atol=1e-4, seed=31)


@slow
def test_inductor_cpu_matches_eager(bundle: ModelBundle, ci_options: BuildOptions) -> None:
    engines = build_engines(bundle, "inductor", CPU, torch.float32, options=ci_options)
    # Buckets pad the vocoder's mel with silence frames: the last samples see them through the receptive field.
    check_modules(bundle, {k: v for k, v in engines.items() if k != "vocoder"}, atol=1e-4, seed=41)
    cfg = bundle.config.acoustic
    inputs = random_inputs([12, 30], cfg.cond_dim, cfg.vocab_size, [90, 200], seed=5)
    wav, _ = run_pipeline(engines, inputs, CPU)
    ref, _ = run_pipeline(_eager(bundle), inputs, CPU)
    assert log_mel_l1(wav, ref) < 0.05


@slow
@pytest.mark.parametrize("backend", ["onnx", "aoti"])
def test_emotion_encoder_engine(bundle: ModelBundle, ci_options: BuildOptions, backend: str) -> None:
    engine = build_engine(backend, "emotion", module_fn(bundle, "emotion", CPU), CPU, torch.float32, ci_options)
    mel = torch.randn(2, 80, 50) - 4.0
    mask = torch.arange(50)[None] < torch.tensor([[50], [31]])
    with torch.no_grad():
        want = bundle.emotion_encoder(mel, mask)
    for got, ref in zip(engine(mel, mask), want, strict=True):
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-4)


def test_aoti_loads_in_a_child_process_first_where_a_segfault_was_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    from rtvox.engines.aoti import SAFE_LOAD_ENV, needs_safe_load

    monkeypatch.delenv(SAFE_LOAD_ENV, raising=False)
    cpu = torch.device("cpu")
    assert needs_safe_load(torch.device("cuda"), "2.13.0")
    assert needs_safe_load(cpu, "2.11.0+cu130")  # the H200's torch: CPU packages segfault on load there too
    assert not needs_safe_load(cpu, "2.13.0+cpu") and not needs_safe_load(cpu, "2.14.1")
    assert needs_safe_load(cpu, "1.99.0")
    monkeypatch.setenv(SAFE_LOAD_ENV, "1")
    assert needs_safe_load(cpu, "2.13.0")


def test_onnx_build_keeps_stdout_clean(bundle: ModelBundle, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The exporter's progress lines go to stderr: a command's stdout (benchmark JSON, audio on `-o -`) stays
    clean when an engine is built on the way."""
    pytest.importorskip("onnxruntime")
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path, model_hash="stdout", warmup=False)
    capfd.readouterr()
    build_engines(bundle, "onnx", CPU, torch.float32, modules=("vocoder",), options=options)
    assert capfd.readouterr().out == ""


def test_an_onnx_export_that_fails_leaves_nothing_half_written(
    bundle: ModelBundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph is written beside its place and renamed over it, so a worker never loads another's partial
    file; a failed export leaves no model for the next build to trust, and no temp file."""
    pytest.importorskip("onnxruntime")
    import rtvox.engines.onnxrt as onnxrt

    def half_then_fail(net: object, module: str, profile: object, example: object, target: Path) -> None:
        target.write_bytes(b"\x08\x07half an onnx graph")
        raise RuntimeError("disk full")

    monkeypatch.setattr(onnxrt, "export_onnx", half_then_fail)
    options = BuildOptions(profile=ShapeProfile.preset("ci"), cache_dir=tmp_path, model_hash="partial", warmup=False)
    with pytest.raises(RuntimeError, match="disk full"):
        build_engines(bundle, "onnx", CPU, torch.float32, modules=("vocoder",), options=options)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["meta.json"]  # the key, readable; no graph
    monkeypatch.undo()
    engine = build_engines(bundle, "onnx", CPU, torch.float32, modules=("vocoder",), options=options)["vocoder"]
    assert Path(str(engine.info["model"])).is_file()  # type: ignore[attr-defined]
