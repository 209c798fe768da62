"""config.json `lead_in`: a throw-away word and pause before each chunk of a language, cut off the chunk's audio."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rtvox.cli import app
from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH
from rtvox.errors import ModelError
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob, PreparedChunk
from rtvox.runtime.types import SynthesisRequest
from rtvox.training.prosody_prior import update_config

from .conftest import vary_durations

EN = "Apples are red, and the sky is blue. Only one more thing: every day is a new day."
ZH = "爱是一种力量。"


@pytest.fixture
def lead_model(runtime_model: Path, tmp_path: Path) -> Path:
    model = tmp_path / "lead"
    shutil.copytree(runtime_model, model)
    update_config(model, lambda c: dataclasses.replace(c, lead_in={"en": "So,"}))
    return model


def test_english_chunks_get_the_lead_ids_and_mandarin_ones_none(lead_model: Path, runtime_model: Path) -> None:
    synth = vary_durations(Synthesizer(lead_model, device="cpu"))
    plain = vary_durations(Synthesizer(runtime_model, device="cpu"))
    lead = synth.lead_ids["en"]
    # "So," -> s, stress, oʊ and a comma's pause
    assert synth.vocab.decode(lead) == ["en:s", "en:ˈ", "en:oʊ", "#3"]
    request = SynthesisRequest(text=f"{ZH} {EN}")  # a Mandarin first chunk, then an English one
    prepared, bare = synth.prepare(request), plain.prepare(request)
    assert len(prepared.chunks) == len(bare.chunks)
    langs = []
    for chunk, base in zip(prepared.chunks, bare.chunks, strict=True):
        english = next(p for p in chunk.phonemes if ":" in p).startswith("en:")
        langs.append(english)
        assert chunk.lead == (len(lead) if english else 0)
        assert chunk.ids == (lead if english else ()) + base.ids
        assert chunk.phonemes == base.phonemes
    assert langs[0] is False and True in langs
    assert prepared.phoneme_count == bare.phoneme_count  # limits count the text's phonemes, not the lead-in's


def test_the_chunk_is_what_the_model_renders_after_its_lead_in(lead_model: Path) -> None:
    synth = vary_durations(Synthesizer(lead_model, device="cpu"))
    prepared = synth.prepare(SynthesisRequest(text=EN))
    for index, chunk in enumerate(prepared.chunks):
        (got,) = synth.run_step([ChunkJob(prepared, index)])
        whole = dataclasses.replace(prepared, chunks=(dataclasses.replace(chunk, lead=0, positions=()),))
        (full,) = synth.run_step([ChunkJob(whole, 0)])
        lead_frames = sum(full.durations[: chunk.lead])
        assert lead_frames > 0
        np.testing.assert_array_equal(got.audio, full.audio[lead_frames * HOP_LENGTH :])
        assert sum(got.durations) * HOP_LENGTH == len(got.audio)
        spoken = [
            d for d, p in zip(got.durations, got.phonemes, strict=True) if p not in synth.bundle.config.skip_symbols
        ]
        assert spoken == list(full.durations[chunk.lead :])


@pytest.mark.parametrize("ratio", [0.7, 1.0, 1.4])
def test_a_target_duration_stays_exact_with_a_lead_in(lead_model: Path, ratio: float) -> None:
    synth = vary_durations(Synthesizer(lead_model, device="cpu"))
    natural = len(synth.synthesize(EN).audio) / HOP_LENGTH / FRAMES_PER_SECOND
    target = round(natural * ratio, 2)
    chunks = list(synth.stream(EN, duration=target))
    audio = np.concatenate([c.audio for c in chunks])
    assert len(audio) == round(target * FRAMES_PER_SECOND) * HOP_LENGTH
    for c in chunks:
        assert sum(c.durations) * HOP_LENGTH == len(c.audio)


def test_cut_lead_moves_frames_to_or_from_the_first_phonemes() -> None:
    wav = np.arange(20 * HOP_LENGTH, dtype=np.float32)
    chunk = PreparedChunk(text="x", phonemes=("a", "b", "c"), ids=(9, 9, 1, 2, 3), target_frames=20, lead=2)
    audio, frames = chunk.cut_lead(wav, [3, 4, 2, 5, 6])  # no target: the lead-in's 7 frames go
    assert frames == [2, 5, 6] and audio[0] == 7 * HOP_LENGTH
    kept = dataclasses.replace(chunk, content_frames=15)  # 20 rendered, 15 kept: 2 of the pause stay with "a"
    audio, frames = kept.cut_lead(wav, [3, 4, 2, 5, 6])
    assert frames == [4, 5, 6] and len(audio) == 15 * HOP_LENGTH
    short = dataclasses.replace(chunk, content_frames=10)  # 10 kept: "a" and 1 frame of "b" are cut too
    audio, frames = short.cut_lead(wav, [3, 4, 2, 5, 6])
    assert frames == [0, 4, 6] and len(audio) == 10 * HOP_LENGTH


@pytest.mark.parametrize(
    ("lead_in", "message"),
    [({"fr": "Alors,"}, "lead_in['fr']"), ({"en": "x" * 17}, "1-16 characters"), ({"zh": "So,"}, "one short zh")],
)
def test_a_bad_lead_in_is_refused_at_load(runtime_model: Path, tmp_path: Path, lead_in: dict, message: str) -> None:
    model = tmp_path / "bad"
    shutil.copytree(runtime_model, model)
    config = json.loads((model / "config.json").read_text())
    config["lead_in"] = lead_in
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Synthesizer(model, device="cpu")


def test_train_lead_in_sets_and_removes_a_language_and_refuses_bad_pairs(runtime_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    shutil.copytree(runtime_model, model)
    runner = CliRunner()
    result = runner.invoke(app, ["train", "lead-in", "--model", str(model), "en=So,", "zh=嗯，"])
    assert result.exit_code == 0, result.output
    assert json.loads((model / "config.json").read_text("utf-8"))["lead_in"] == {"en": "So,", "zh": "嗯，"}
    before = (model / "config.json").read_text("utf-8")
    for bad, named in (("fr=Alors,", "'fr=Alors,': give LANG=TEXT"), ("zh=So,", "must read as one short zh phrase")):
        result = runner.invoke(app, ["train", "lead-in", "--model", str(model), bad])
        flat = " ".join(result.output.replace("│", " ").split())
        assert result.exit_code == 2 and named in flat, result.output
    assert (model / "config.json").read_text("utf-8") == before  # nothing written
    assert runner.invoke(app, ["train", "lead-in", "--model", str(model), "zh="]).exit_code == 0
    assert json.loads((model / "config.json").read_text("utf-8"))["lead_in"] == {"en": "So,"}
