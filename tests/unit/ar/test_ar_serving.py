"""The autoregressive family served like the default one: its model directory, the Synthesizer's AR path (exact
lengths, seeds, batched == alone, unsupported options) and the HTTP API over the real service, on a random tiny model.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from safetensors import safe_open

from rtvox.audio import decode_audio
from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, SAMPLE_RATE
from rtvox.errors import InputError, ModelError
from rtvox.models.ar_bundle import ARBundle, load_bundle, make_random_ar_bundle
from rtvox.models.bundle import MAX_FILE_BYTES, ModelBundle
from rtvox.runtime import Synthesizer
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.types import SynthesisRequest
from rtvox.server import create_app
from rtvox.text import Vocabulary

TEXTS = [
    "你好，欢迎使用 rtvox。This is a quick demo of mixed Chinese and English speech.",
    "Hi there.",
    "今天天气很好，我们去公园散步吧。",
]
DATA = Path(__file__).resolve().parents[2] / "data"
VOICES = {"anna": {"gender": "female", "language": "zh"}, "ben": {"gender": "male", "language": "en"}}


@pytest.fixture(scope="module", params=[False, True], ids=["codes", "phoneme-pointer"])
def ar_model(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A random AR model directory: plain codes, and phoneme-pointer tokens (every test runs on both)."""
    path = tmp_path_factory.mktemp("ar-models") / "ar-tiny"
    vocab = Vocabulary.default().to_dict()
    make_random_ar_bundle(path, vocab, voices=VOICES, skip_symbols=("#1", "#2"), pointer=request.param)
    return path


@pytest.fixture(scope="module")
def synth(ar_model: Path) -> Synthesizer:
    return Synthesizer(ar_model, device="cpu")


def _state(bundle: ARBundle) -> dict[str, torch.Tensor]:
    modules = {"ar": bundle.ar, "codec": bundle.codec, "vocoder": bundle.vocoder, "table": bundle.emotion_table}
    return {f"{m}.{k}": v for m, module in modules.items() for k, v in module.state_dict().items()}


def test_directory_round_trip_fp16_sharded_and_family_dispatch(ar_model: Path, tmp_path: Path) -> None:
    config = json.loads((ar_model / "config.json").read_text("utf-8"))
    assert next(iter(config)) == "family" and config["family"] == "ar"
    assert {"ar", "codec", "vocoder", "emotion", "skip_symbols", "default_voice", "sample_rate"} <= set(config)
    for stem in ("ar", "codec", "vocoder", "emotion", "voices"):
        path = ar_model / f"{stem}.safetensors"
        assert path.stat().st_size < MAX_FILE_BYTES
        with safe_open(path, "pt") as f:
            assert all(f.get_tensor(k).dtype == torch.float16 for k in f.keys())  # noqa: SIM118
    for name in ("voices.json", "vocab.json", "MODEL_CARD.md"):
        assert (ar_model / name).is_file()
    bundle = load_bundle(ar_model)
    assert isinstance(bundle, ARBundle) and list(bundle.voices) == ["anna", "ben"]
    assert bundle.config.skip_symbols == ("#1", "#2")
    with pytest.raises(ModelError, match="'ar'-family"):
        ModelBundle.load(ar_model)
    # saved again with a small file limit: every module is sharded and loads back to the same tensors
    copy = bundle.save(tmp_path / "copy", max_file_bytes=100_000)
    assert len(list(copy.glob("ar-*-of-*.safetensors"))) > 1
    again = ARBundle.load(copy)
    assert again.config == bundle.config
    want = _state(bundle)
    for key, value in _state(again).items():
        torch.testing.assert_close(value, want[key], rtol=0, atol=0)


def test_target_duration_is_exact_and_free_length_positive(synth: Synthesizer) -> None:
    assert synth.engines == {}  # the AR family decodes through its own engine
    result = synth.synthesize(TEXTS[0], duration=1.7, voice="ben")
    assert len(result.chunks) >= 2
    assert result.audio.dtype == np.float32 and np.isfinite(result.audio).all()
    assert len(result.audio) == round(1.7 * FRAMES_PER_SECOND) * HOP_LENGTH
    free = synth.synthesize(TEXTS[1])
    assert free.audio.size > 0 and np.isfinite(free.audio).all()
    slow = synth.synthesize(TEXTS[1], speed=0.5)
    assert len(slow.audio) == 2 * len(free.audio)  # speed resamples the same codes' mel
    for chunk in result.chunks:  # frames spread over the phonemes the model saw; skipped boundaries get 0
        assert len(chunk.durations) == len(chunk.phonemes)
        assert sum(chunk.durations) * HOP_LENGTH == chunk.audio.size
        assert all(d == 0 for p, d in zip(chunk.phonemes, chunk.durations, strict=True) if p in ("#1", "#2"))


def test_seed_makes_audio_reproducible(synth: Synthesizer) -> None:
    first = synth.synthesize(TEXTS[2], seed=11).audio
    np.testing.assert_array_equal(first, synth.synthesize(TEXTS[2], seed=11).audio)
    assert not np.array_equal(first, synth.synthesize(TEXTS[2], seed=12).audio)


def test_batched_step_equals_each_job_alone(synth: Synthesizer) -> None:
    requests = [
        SynthesisRequest(text=TEXTS[0], seed=1, voice="anna"),
        SynthesisRequest(text=TEXTS[1], seed=2, duration=0.9),
        SynthesisRequest(text=TEXTS[2], seed=3, speed=1.4, emotion="happy"),
    ]
    jobs = [ChunkJob(synth.prepare(r), 0) for r in requests]
    batched = synth.run_step(jobs)
    for job, out in zip(jobs, batched, strict=True):
        (alone,) = synth.run_step([job])
        assert out.durations == alone.durations and out.index == alone.index and out.is_last == alone.is_last
        peak = max(float(np.abs(alone.audio).max()), 1e-6)
        assert out.audio.shape == alone.audio.shape
        assert float(np.abs(out.audio - alone.audio).max()) <= 1e-4 * peak


def test_a_step_cut_short_leaves_the_next_one_clean(synth: Synthesizer, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [ChunkJob(synth.prepare(SynthesisRequest(text=t, seed=5)), 0) for t in TEXTS[1:]]
    want = synth.run_step(jobs)
    assert synth._ar_step is not None
    broken = synth._ar_step.decoder
    original = broken.step

    def fault() -> object:
        original()  # requests are admitted and running when the fault hits
        raise RuntimeError("device fault")

    monkeypatch.setattr(broken, "step", fault)
    with pytest.raises(RuntimeError, match="device fault"):
        synth.run_step(jobs)
    assert synth._ar_step.decoder is not broken
    for got, expected in zip(synth.run_step(jobs), want, strict=True):
        np.testing.assert_array_equal(got.audio, expected.audio)


@pytest.mark.parametrize("field", ["pitch_scale", "energy_scale"])
def test_pitch_and_energy_scales_are_refused(synth: Synthesizer, field: str) -> None:
    with pytest.raises(InputError, match=f"{field} is not supported") as info:
        synth.prepare(SynthesisRequest(text=TEXTS[1], **{field: 1.5}))  # type: ignore[arg-type]
    assert info.value.param == field
    assert synth.prepare(SynthesisRequest(text=TEXTS[1], pitch_scale=1.0)).chunks  # the neutral value is fine


def test_emotion_reference_is_refused(synth: Synthesizer) -> None:
    clip = (0.3 * np.sin(np.arange(SAMPLE_RATE * 3) / 9)).astype(np.float32)
    with pytest.raises(InputError, match="no emotion encoder") as info:
        synth.prepare(SynthesisRequest(text=TEXTS[1], emotion_ref=clip))
    assert info.value.param == "emotion_reference"


def test_a_token_count_beyond_the_model_s_largest_is_an_input_error(synth: Synthesizer) -> None:
    config = synth.bundle.config.ar
    seconds = (config.max_count + 8) * synth.bundle.config.codec.downsample / FRAMES_PER_SECOND
    with pytest.raises(InputError, match=f"over this model's {config.max_count}") as err:
        synth.synthesize("Hi.", duration=seconds)
    assert err.value.param == "duration"


def test_text_beyond_the_context_is_an_input_error(synth: Synthesizer) -> None:
    # one chunk (so how text is chunked cannot move the check that fires): ~1 400 codes > the tiny model's 256
    with pytest.raises(InputError, match="positions"):
        synth.prepare(SynthesisRequest(text="Hello world, 你好。", duration=60.0))


@pytest.fixture(scope="module")
def client(synth: Synthesizer) -> Iterator[TestClient]:
    service = TTSService(synth, ServiceConfig(fallback_device=None))
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


def test_http_speech_and_tts_from_an_ar_model(client: TestClient) -> None:
    response = client.post(
        "/v1/audio/speech", json={"model": "tts-1", "input": TEXTS[0], "voice": "alloy", "response_format": "wav"}
    )
    assert response.status_code == 200, response.text
    wav, sr = decode_audio(response.content)
    assert sr == SAMPLE_RATE and len(wav) > 0
    response = client.post("/v1/tts", json={"text": "Hello world, 你好。", "duration": 1.5, "response_format": "pcm"})
    assert response.status_code == 200, response.text
    assert len(response.content) == 2 * round(1.5 * FRAMES_PER_SECOND) * HOP_LENGTH
    body = client.post("/v1/tts", json={"text": "Hello world, 你好。", "stream_format": "json", "timestamps": True})
    assert body.status_code == 200, body.text
    words = body.json()["words"]
    assert [w["text"] for w in words] == ["Hello", "world", "你好"]
    assert all(w["start"] <= w["end"] for w in words)


def test_http_unsupported_options_are_400_json(client: TestClient) -> None:
    response = client.post("/v1/tts", json={"text": TEXTS[1], "pitch_scale": 1.5})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "pitch_scale" and "not supported" in error["message"]
    reference = base64.b64encode((DATA / "speech_en_female_16k.wav").read_bytes()).decode()
    response = client.post("/v1/tts", json={"text": TEXTS[1], "emotion_reference": reference})
    assert response.status_code == 400, response.text
    assert "no emotion encoder" in response.json()["error"]["message"]
