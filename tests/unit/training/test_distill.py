"""Decoder distillation: the student's initialization, training that lowers its error, the model it writes, resume,
and the errors for a shape the teacher cannot give."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from rtvox.cli import app
from rtvox.errors import InputError
from rtvox.models.acoustic import AcousticModel
from rtvox.models.bundle import ModelBundle, load_weights
from rtvox.training.distill import (
    FeatureTarget,
    Pair,
    StudentShape,
    distill_decoder,
    distill_loss,
    evaluate,
    fit_kernels,
    masked_l1,
    student_from_teacher,
    write_student,
)

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "We will meet at the station at nine.",
    "今天天气很好，我们去公园散步吧。",
    "请把窗户关上，外面有点冷。",
    "My phone number ends in four two seven.",
    "他明天要去北京开会。",
]


@pytest.fixture(scope="module")
def teacher(make_tiny_model: Callable[[str], Path]) -> Path:
    """A tiny random teacher with two decoder blocks (kernel 3) and a postnet."""
    tiny = make_tiny_model("distill")
    bundle = ModelBundle.load(tiny)
    config = dataclasses.replace(bundle.config.acoustic, decoder_layers=2, decoder_ff_kernels=(3, 1))
    torch.manual_seed(1)
    model = AcousticModel(config).eval()
    # the encoder side as the original tiny model has it, so its durations stay sane
    model.load_state_dict(
        {k: v for k, v in bundle.acoustic.state_dict().items() if not k.startswith("decoder.")}, strict=False
    )
    return write_student(tiny, tiny.parent / "teacher", model, "0.2.0")


def _inputs(model: AcousticModel, frames: int = 40) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(3)
    hidden = torch.randn(2, 7, model.config.dim)
    durations = torch.tensor([[6, 6, 6, 6, 6, 5, 5], [3, 3, 3, 3, 3, 0, 0]])
    mask = torch.arange(frames)[None] < durations.sum(1, keepdim=True)
    return hidden, durations, mask


def test_a_student_that_keeps_everything_decodes_as_its_teacher(teacher: Path) -> None:
    model = ModelBundle.load(teacher).acoustic
    student = student_from_teacher(model, StudentShape((0, 1), 3, True)).eval()
    with torch.inference_mode():
        assert torch.equal(student.decode_masked(*_inputs(model)), model.decode_masked(*_inputs(model)))


def test_the_student_takes_the_centre_taps_and_the_kept_blocks(teacher: Path) -> None:
    model = ModelBundle.load(teacher).acoustic
    with torch.no_grad():  # a teacher whose outer taps are zero: its kernel-3 convolutions are kernel-1 ones
        for block in model.decoder.blocks:
            for conv in (m for m in block.modules() if isinstance(m, torch.nn.Conv1d) and m.kernel_size[0] == 3):
                conv.weight[..., 0] = 0
                conv.weight[..., 2] = 0
    student = student_from_teacher(model, StudentShape((0, 1), 1, True)).eval()
    assert student.config.decoder_ff_kernels == (1, 1)
    with torch.inference_mode():
        torch.testing.assert_close(
            student.decode_masked(*_inputs(model)), model.decode_masked(*_inputs(model)), atol=1e-5, rtol=0
        )
    dropped = student_from_teacher(model, StudentShape((1,), 3, False))
    assert dropped.config.decoder_layers == 1 and dropped.postnet is None
    kept = dropped.decoder.blocks[0].state_dict()
    for key, value in model.decoder.blocks[1].state_dict().items():
        assert torch.equal(kept[key], value), key


def _pairs(model: AcousticModel, n: int = 12) -> list[Pair]:
    """Teacher pairs from random encoder outputs with durations of 1-6 frames."""
    gen = torch.Generator().manual_seed(5)
    pairs = []
    with torch.inference_mode():
        for i in range(n):
            length = 5 + i % 4
            hidden = torch.randn(1, length, model.config.dim, generator=gen)
            durations = torch.randint(1, 7, (1, length), generator=gen)
            mel = model.decode(hidden, durations)
            pairs.append(Pair(hidden[0], durations[0], mel[0]))
    return pairs


def test_the_kernel_refit_recovers_most_of_what_cropping_loses(teacher: Path) -> None:
    model = ModelBundle.load(teacher).acoustic.eval()
    with torch.no_grad():  # outer taps that matter, so the crop alone loses a good deal
        for block in model.decoder.blocks:
            block.ffn.conv1.weight[..., 0] += 0.5 * block.ffn.conv1.weight[..., 1]  # type: ignore[union-attr,index]
    pairs = _pairs(model)
    shape = StudentShape((0, 1), 1, True)
    cropped = student_from_teacher(model, shape).eval()
    refit = student_from_teacher(model, shape).eval()
    assert fit_kernels(model, refit, shape, pairs, batch_frames=400)
    crop_error, fit_error = evaluate(cropped, pairs, 400), evaluate(refit, pairs, 400)
    assert fit_error < 0.6 * crop_error, (crop_error, fit_error)
    assert refit.decoder.blocks[0].ffn.conv1.weight.shape == cropped.decoder.blocks[0].ffn.conv1.weight.shape  # type: ignore[union-attr]
    # a student that keeps the teacher's kernel is left as it is
    same = student_from_teacher(model, StudentShape((0, 1), 3, True)).eval()
    assert not fit_kernels(model, same, StudentShape((0, 1), 3, True), pairs, batch_frames=400)
    assert evaluate(same, pairs, 400) < 1e-6


def test_the_block_targets_are_zero_for_the_teacher_itself_and_count_for_a_student(teacher: Path) -> None:
    model = ModelBundle.load(teacher).acoustic.eval()
    pairs = _pairs(model, 4)
    twin = student_from_teacher(model, StudentShape((0, 1), 3, True)).eval()
    features = FeatureTarget(model, (0, 1), 1.0)
    student = student_from_teacher(model, StudentShape((1,), 3, True)).eval()  # block 1 alone, pulled to block 1
    with torch.no_grad():
        assert float(distill_loss(twin, pairs, features)) < 1e-6
        mel_only = float(masked_l1(student, pairs))
        assert float(distill_loss(student, pairs, None)) == mel_only
        assert float(distill_loss(student, pairs, FeatureTarget(model, (1,), 1.0))) > mel_only


def test_distillation_lowers_the_error_and_writes_a_model_that_speaks(teacher: Path, tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS * 4) + "\n", encoding="utf-8")
    lines: list[str] = []
    out, run = tmp_path / "student", tmp_path / "run"
    shape = StudentShape((0,), 1, False)
    figures = distill_decoder(
        teacher, texts, out, run, shape, steps=12, batch_frames=600, lr=3e-3, version="0.3.0", log=lines.append
    )
    init = float(next(line for line in lines if line.startswith("init valid L1")).split()[3])
    assert figures["step"] == 12 and figures["valid_l1"] < 0.9 * init, (init, figures)

    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["version"] == "0.3.0"
    assert config["acoustic"]["decoder_layers"] == 1 and config["acoustic"]["postnet_layers"] == 0
    assert config["acoustic"]["decoder_ff_kernels"] == [1, 1]
    old = load_weights(teacher, "acoustic", torch.device("cpu"), torch.float32)
    new = load_weights(out, "acoustic", torch.device("cpu"), torch.float32)
    for key, value in old.items():  # everything but the decoder side is the teacher's, bit for bit
        if not key.startswith(("decoder.", "postnet.", "mel_out.", "frame_pos.")):
            assert torch.equal(new[key], value), key
    assert not any(k.startswith("postnet.") for k in new)
    for name in ("vocoder.safetensors", "voices.json", "vocab.json"):
        assert (out / name).read_bytes() == (teacher / name).read_bytes()

    from rtvox.runtime.synthesizer import Synthesizer

    audio = Synthesizer(out, device="cpu").synthesize("Hello there.").audio
    assert audio.size > 2400 and np.isfinite(audio).all()

    # a training run warm-started from the student builds the student's decoder, not the preset's, and loads it
    from rtvox.text.vocab import Vocabulary
    from rtvox.training.acoustic import NEW_LAYERS, AcousticRun, build_modules, load_model_init, run_config

    vocab = len(Vocabulary.default())
    warm = run_config(AcousticRun(data=tmp_path, run_dir=tmp_path, preset="tiny", init=out), vocab)
    assert warm.acoustic.decoder_layers == 1 and warm.acoustic.postnet_layers == 0
    assert warm.acoustic.decoder_ff_kernels == (1, 1)
    load_model_init(out, build_modules(warm, vocab), NEW_LAYERS)  # strict: raises on any shape or key mismatch

    # a second call with more steps resumes: the pairs and the state are read back, not made again
    lines.clear()
    again = distill_decoder(teacher, texts, out, run, shape, steps=16, batch_frames=600, lr=3e-3, log=lines.append)
    assert any(line.endswith(f"pairs from {run / 'pairs.pt'}") for line in lines)
    assert "resumed at step 12" in lines
    assert again["step"] == 16


def test_a_shape_the_teacher_cannot_give_is_refused(teacher: Path) -> None:
    model = ModelBundle.load(teacher).acoustic
    for shape, words in (
        (StudentShape((0, 2), 3, False), "keep blocks [0, 2]"),
        (StudentShape((0, 0), 3, False), "repeat"),
        (StudentShape((0,), 2, False), "ff kernel 2"),
        (StudentShape((0,), 5, False), "teacher's 3"),
        (StudentShape((), 3, False), "keep blocks []"),
    ):
        with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
            student_from_teacher(model, shape)


def test_the_command_names_what_is_wrong(teacher: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["train", "distill-decoder", "--teacher", str(teacher), "--out", str(tmp_path / "o")]
    base += ["--run-dir", str(tmp_path / "r")]
    result = runner.invoke(app, [*base, "--texts", str(tmp_path / "none.txt")])
    assert result.exit_code == 2 and "none.txt does not exist" in result.stderr
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS * 4), encoding="utf-8")
    result = runner.invoke(app, [*base, "--texts", str(texts), "--keep", "0,7"])
    assert result.exit_code == 2 and "keep blocks [0, 7]" in result.stderr
    result = runner.invoke(app, [*base, "--texts", str(texts), "--keep", "zero"])
    assert result.exit_code == 2 and "--keep" in result.stderr
    assert not (tmp_path / "o").exists()
    result = runner.invoke(
        app, [*base[:-4], "--out", str(teacher), "--run-dir", str(tmp_path / "r"), "--texts", str(texts)]
    )
    assert result.exit_code == 2 and "must not be the teacher's" in result.stderr
    assert not (tmp_path / "r" / "pairs.pt").exists()  # refused before any work


def test_the_pair_requests_draw_emotions_from_the_given_mix() -> None:
    import random

    from rtvox.training.distill import EMOTION_CHOICES, request_settings

    rng = random.Random(0)
    picks = [request_settings(rng, ["anna", "ben"], ("angry", "angry", None)).emotion for _ in range(300)]
    assert set(picks) == {"angry", None} and 170 < picks.count("angry") < 230
    default = {request_settings(rng, ["anna", "ben"]).emotion for _ in range(300)}
    assert default == set(EMOTION_CHOICES)


def test_a_share_of_the_pair_requests_speaks_with_a_reference_clip() -> None:
    import random

    from rtvox.training.distill import request_settings

    rng = random.Random(0)
    picks = [request_settings(rng, ["anna", "ben"], clips=3, clip_share=0.5) for _ in range(400)]
    cloned = [p.clip for p in picks if p.clip is not None]
    assert 160 < len(cloned) < 240 and set(cloned) == {0, 1, 2}
    assert all(p.voice in {"anna", "ben"} for p in picks if p.clip is None)
    assert all(request_settings(rng, ["anna", "ben"], clip_share=1.0).clip is None for _ in range(50))  # no clips


def test_pairs_made_with_a_reference_clip_follow_its_embedding(teacher: Path, tmp_path: Path) -> None:
    import soundfile as sf

    from rtvox.training.distill import embed_clips, make_pairs

    t = np.arange(24_000 * 4) / 24_000
    clip = tmp_path / "ref.wav"
    sf.write(clip, (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32), 24_000)
    texts = TEXTS[:2]
    builtin = make_pairs(teacher, texts, seed=5, emotions=(None,), log=lambda _: None)
    embeddings = embed_clips(teacher, [clip])
    assert embeddings.shape[0] == 1 and abs(float(np.linalg.norm(embeddings[0])) - 1) < 1e-3
    cloned = make_pairs(
        teacher, texts, seed=5, emotions=(None,), clip_embeddings=embeddings, clip_share=1.0, log=lambda _: None
    )
    assert len(cloned) == len(builtin) and all(p.frames > 0 for p in cloned)
    assert any(not torch.equal(a.hidden, b.hidden) for a, b in zip(builtin, cloned, strict=True))
    with pytest.raises(InputError, match=r"missing\.wav does not exist"):
        embed_clips(teacher, [tmp_path / "missing.wav"])
