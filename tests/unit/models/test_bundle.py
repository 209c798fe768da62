"""Model directory: round trips, sharding, hashing, and the ModelError cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from rtvox.constants import SPEAKER_EMBED_DIM
from rtvox.errors import ModelError
from rtvox.models.acoustic import AcousticModel
from rtvox.models.bundle import (
    CONFIG_NAME,
    ModelBundle,
    ModelConfig,
    make_random_bundle,
    model_hash,
)
from rtvox.models.emotion import fuse_condition

from .conftest import VOCAB_SIZE, make_request, tiny_acoustic


def _synthesize(bundle: ModelBundle) -> tuple[torch.Tensor, torch.Tensor]:
    speaker = torch.stack(list(bundle.voices.values()))  # [2, 256]
    emotion = bundle.emotion_table(torch.tensor([0, 3]))
    request = list(make_request([6, 4], targets=[0, 30]))
    request[2] = fuse_condition(speaker, emotion, torch.tensor([1.0, 0.5]))
    with torch.no_grad():
        mel, _, _ = bundle.acoustic.infer(*request)
        return mel, bundle.vocoder(mel)


def _edit_config(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads((path / CONFIG_NAME).read_text())
    edit(data)
    (path / CONFIG_NAME).write_text(json.dumps(data))


def test_random_bundle_layout_and_contents(tiny_bundle_dir: Path) -> None:
    names = {p.name for p in tiny_bundle_dir.iterdir()}
    assert names == {
        "config.json",
        "acoustic.safetensors",
        "vocoder.safetensors",
        "emotion.safetensors",
        "vocab.json",
        "voices.safetensors",
        "voices.json",
        "MODEL_CARD.md",
    }
    bundle = ModelBundle.load(tiny_bundle_dir)
    assert bundle.config.vocab_size == VOCAB_SIZE and bundle.path == tiny_bundle_dir
    assert bundle.vocab_path == tiny_bundle_dir / "vocab.json" and len(bundle.vocab["symbols"]) == VOCAB_SIZE
    assert list(bundle.voices) == [m["name"] for m in bundle.voices_meta] == ["test_female", "test_male"]
    for embedding in bundle.voices.values():
        assert embedding.shape == (SPEAKER_EMBED_DIM,) and embedding.dtype == torch.float32
        assert abs(float(embedding.norm()) - 1.0) < 1e-2
    assert not bundle.acoustic.training and "Random weights" in bundle.model_card
    mel, wav = _synthesize(bundle)
    assert torch.isfinite(mel).all() and wav.shape[1] == mel.shape[2] * 256


def test_save_load_round_trip_is_exact_and_hash_is_content_based(tiny_bundle_dir: Path, tmp_path: Path) -> None:
    bundle = ModelBundle.load(tiny_bundle_dir)
    again = ModelBundle.load(bundle.save(tmp_path / "again"))
    for a, b in zip(_synthesize(bundle), _synthesize(again), strict=True):
        assert torch.equal(a, b)  # fp16 -> fp16 is lossless
    assert model_hash(tmp_path / "again") == model_hash(tiny_bundle_dir)
    assert again.config == bundle.config


def test_fp32_weights_survive_fp16_storage(tiny_bundle_dir: Path, tmp_path: Path) -> None:
    bundle = ModelBundle.load(tiny_bundle_dir)
    bundle.acoustic = tiny_acoustic(seed=5)  # fresh fp32 weights, same config
    assert bundle.acoustic.config == bundle.config.acoustic
    loaded = ModelBundle.load(bundle.save(tmp_path / "fp16"))
    request = make_request([7], targets=[35])
    with torch.no_grad():
        ref, _, dur = bundle.acoustic.infer(*request)
        out, _, dur2 = loaded.acoustic.infer(*request)
    assert torch.equal(dur, dur2)
    torch.testing.assert_close(out, ref, rtol=0, atol=2e-2)


def test_sharding_round_trip_and_stale_files(tiny_bundle_dir: Path, tmp_path: Path) -> None:
    bundle = ModelBundle.load(tiny_bundle_dir)
    path = bundle.save(tmp_path / "sharded", max_file_bytes=64 * 1024)
    shards = sorted(p.name for p in path.glob("acoustic-*.safetensors"))
    assert len(shards) >= 3 and shards[0] == f"acoustic-00001-of-{len(shards):05d}.safetensors"
    assert not (path / "acoustic.safetensors").exists()
    assert all(p.stat().st_size <= 64 * 1024 for p in path.glob("*.safetensors"))
    sharded = ModelBundle.load(path)
    assert torch.equal(_synthesize(sharded)[0], _synthesize(bundle)[0])
    assert model_hash(path) != model_hash(tiny_bundle_dir)  # file names and layout are part of the hash
    bundle.save(path)  # back to single files: the shards must go
    assert not list(path.glob("acoustic-*")) and (path / "acoustic.safetensors").is_file()
    ModelBundle.load(path)


def test_missing_files_and_shards(bundle_copy: Callable[[], Path], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        ModelBundle.load(tmp_path / "nowhere")
    for name in ("config.json", "vocoder.safetensors", "voices.json", "vocab.json", "voices.safetensors"):
        path = bundle_copy()
        (path / name).unlink()
        with pytest.raises(ModelError, match=name.split(".")[0]):
            ModelBundle.load(path)
    path = bundle_copy()
    ModelBundle.load(path).save(path, max_file_bytes=64 * 1024)
    next(path.glob("acoustic-00002-of-*.safetensors")).unlink()
    with pytest.raises(ModelError, match="acoustic-00002"):
        ModelBundle.load(path)


def test_shape_mismatch_names_the_file(bundle_copy: Callable[[], Path]) -> None:
    path = bundle_copy()
    _edit_config(path, lambda d: d["acoustic"].update(ff_dim=48))
    with pytest.raises(ModelError, match=r"acoustic\*\.safetensors does not match config.json"):
        ModelBundle.load(path)


def test_sample_rate_and_config_errors(bundle_copy: Callable[[], Path]) -> None:
    path = bundle_copy()
    _edit_config(path, lambda d: d.update(sample_rate=22050))
    with pytest.raises(ModelError, match="sample_rate=22050"):
        ModelBundle.load(path)
    path = bundle_copy()
    _edit_config(path, lambda d: d.update(colour="red"))
    with pytest.raises(ModelError, match="colour"):
        ModelBundle.load(path)
    path = bundle_copy()
    _edit_config(path, lambda d: d["emotion"].update(embed_dim=32))
    with pytest.raises(ModelError, match="cond_dim"):
        ModelBundle.load(path)
    path = bundle_copy()
    (path / CONFIG_NAME).write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        ModelBundle.load(path)


def test_corrupt_weights_and_voice_mismatch(bundle_copy: Callable[[], Path]) -> None:
    path = bundle_copy()
    (path / "emotion.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(ModelError, match=r"emotion\.safetensors cannot be read"):
        ModelBundle.load(path)
    path = bundle_copy()
    (path / "voices.json").write_text(json.dumps({"voices": [{"name": "test_female"}]}))
    with pytest.raises(ModelError, match="test_male"):
        ModelBundle.load(path)


def test_config_round_trip_and_load_options(tiny_bundle_dir: Path) -> None:
    config = ModelConfig.preset("base", vocab_size=120)
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    bundle = ModelBundle.load(tiny_bundle_dir, dtype=torch.float16)
    assert bundle.acoustic.embed.weight.dtype == torch.float16
    assert bundle.voices["test_male"].dtype == torch.float16
    assert isinstance(bundle.acoustic, AcousticModel)


def test_make_random_bundle_is_seeded(tmp_path: Path) -> None:
    vocab = {"<pad>": 0, "a": 1, "b": 2}
    first = make_random_bundle(tmp_path / "a", vocab=vocab, seed=3, voices={"solo": {"gender": "female"}})
    second = make_random_bundle(tmp_path / "b", vocab=vocab, seed=3, voices={"solo": {"gender": "female"}})
    assert first.config.vocab_size == 3 and list(first.voices) == ["solo"]
    assert torch.equal(first.voices["solo"], second.voices["solo"])
    assert model_hash(tmp_path / "a") == model_hash(tmp_path / "b")


def test_language_rates_round_trip_validate_and_weight_a_mixed_chunk(bundle_copy: Callable[[], Path]) -> None:
    config = ModelConfig.preset("tiny", vocab_size=VOCAB_SIZE)
    assert "language_rates" not in config.to_dict()  # absent stays absent: the model hash does not move
    assert config.chunk_rate(("en:h", "en:ə", "#1")) == 1.0
    rated = ModelConfig.from_dict({**config.to_dict(), "language_rates": {"en": 0.8}})
    assert ModelConfig.from_dict(json.loads(json.dumps(rated.to_dict()))) == rated
    assert rated.chunk_rate(("en:h", "en:ə", "#1")) == pytest.approx(0.8)
    assert rated.chunk_rate(("zh:n", "zh:i3", "#3")) == 1.0
    assert rated.chunk_rate(("#4",)) == 1.0
    # half en, half zh: durations grow by the mean of 1/0.8 and 1/1
    assert rated.chunk_rate(("en:h", "en:ə", "zh:n", "zh:i3")) == pytest.approx(1 / ((1 / 0.8 + 1.0) / 2))
    for bad, message in (({"en": 0.1}, "outside"), ({"en": "slow"}, "numbers"), (["en"], "language_rates")):
        path = bundle_copy()
        _edit_config(path, lambda d, bad=bad: d.update(language_rates=bad))
        with pytest.raises(ModelError, match=message):
            ModelBundle.load(path)
