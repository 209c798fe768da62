"""GE2E speaker encoder: shipped weights, mel frontend and embeddings against the `resemblyzer` reference.

The speech clips in tests/data were generated once with espeak-ng (the library that the espeakng-loader
package ships, driven through ctypes), resampled to 16 kHz mono 16-bit wav: `speech_en_male_16k.wav`
(voice en-us, 5.9 s) and `speech_en_female_16k.wav` (voice en-us+f3, pitch 70, 3.5 s).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rtvox.audio import load_audio
from rtvox.audio.loudness import db_to_gain, rms_dbfs
from rtvox.constants import SPEAKER_EMBED_DIM, SPEAKER_SAMPLE_RATE
from rtvox.errors import ModelError
from rtvox.models.speaker import (
    CONFIG_NAME,
    MODELS_DIR_ENV,
    WEIGHTS_NAME,
    SpeakerEncoder,
    SpeakerEncoderConfig,
    default_speaker_encoder_dir,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MALE = DATA / "speech_en_male_16k.wav"
FEMALE = DATA / "speech_en_female_16k.wav"
PARITY_ATOL = 1e-3


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    return SpeakerEncoder.load()


@pytest.fixture(scope="module")
def resemblyzer() -> Any:
    return pytest.importorskip("resemblyzer")


@pytest.fixture(scope="module")
def reference_encoder(resemblyzer: Any) -> Any:
    return resemblyzer.VoiceEncoder(device="cpu", verbose=False)


@pytest.fixture(scope="module")
def male_preprocessed(resemblyzer: Any) -> np.ndarray:
    """resemblyzer's own preprocessing (level to -30 dBFS, webrtcvad trimming) of the male clip."""
    return np.asarray(resemblyzer.preprocess_wav(load_audio(MALE, SPEAKER_SAMPLE_RATE)), dtype=np.float32)


def test_config_round_trip() -> None:
    config = SpeakerEncoderConfig()
    assert SpeakerEncoderConfig.from_dict(config.to_dict()) == config
    assert (config.n_fft, config.hop_length) == (400, 160)
    with pytest.raises(ModelError, match="unknown speaker encoder config keys"):
        SpeakerEncoderConfig.from_dict({**config.to_dict(), "hiden_size": 3})
    with pytest.raises(ModelError, match="not a 'ge2e'"):
        SpeakerEncoderConfig.from_dict({"model_type": "ecapa"})


def test_default_dir_and_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    shipped = default_speaker_encoder_dir()
    assert shipped.parts[-2:] == ("models", "ge2e")
    assert (shipped / CONFIG_NAME).is_file() and (shipped / WEIGHTS_NAME).is_file()
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    assert default_speaker_encoder_dir() == tmp_path / "ge2e"
    with pytest.raises(ModelError, match=r"convert_ge2e\.py"):
        SpeakerEncoder.load()


def test_load_gives_fp32_real_tensors(encoder: SpeakerEncoder) -> None:
    assert not encoder.training
    for name, tensor in [*encoder.named_parameters(), *encoder.named_buffers()]:
        assert tensor.device.type == "cpu", name
        assert tensor.dtype == torch.float32, name
    assert encoder.config == SpeakerEncoderConfig()


def test_load_rejects_mismatched_weights(tmp_path: Path) -> None:
    shipped = default_speaker_encoder_dir()
    (tmp_path / WEIGHTS_NAME).write_bytes((shipped / WEIGHTS_NAME).read_bytes())
    config = {**SpeakerEncoderConfig().to_dict(), "hidden_size": 128}
    (tmp_path / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(ModelError, match="does not match its config"):
        SpeakerEncoder.load(tmp_path)


def test_forward_shapes_and_norm() -> None:
    torch.manual_seed(0)
    model = SpeakerEncoder().eval()
    with torch.inference_mode():
        embeds = model(torch.rand(3, 160, 40))
    assert embeds.shape == (3, SPEAKER_EMBED_DIM)
    torch.testing.assert_close(embeds.norm(dim=1), torch.ones(3))
    assert bool((embeds >= 0).all())


# nn.LSTM caches its weights in a plain list, which torch.export warns about; the export itself is exact.
@pytest.mark.filterwarnings("ignore:The tensor attributes self.lstm._flat_weights")
def test_forward_exports(encoder: SpeakerEncoder) -> None:
    mels = torch.rand(2, 160, 40)
    exported = torch.export.export(encoder, (mels,))
    with torch.inference_mode():
        torch.testing.assert_close(exported.module()(mels), encoder(mels))


def test_frontend_matches_librosa(encoder: SpeakerEncoder) -> None:
    librosa = pytest.importorskip("librosa")
    wav = load_audio(MALE, SPEAKER_SAMPLE_RATE)
    theirs = librosa.feature.melspectrogram(y=wav, sr=16_000, n_fft=400, hop_length=160, n_mels=40).T
    with torch.inference_mode():
        ours = encoder.frontend(torch.from_numpy(wav)[None])[0].numpy()
    assert ours.shape == theirs.shape == (1 + wav.shape[0] // 160, 40)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-5 * float(theirs.max()))


@pytest.mark.parametrize("n_samples", [1, 1_000, 25_599, 25_600, 32_000, 48_000, 93_120, 160_000])
def test_partials_match_resemblyzer(n_samples: int, encoder: SpeakerEncoder, reference_encoder: Any) -> None:
    _, mel_slices = reference_encoder.compute_partial_slices(n_samples, rate=1.3, min_coverage=0.75)
    assert encoder.partial_starts(n_samples) == [s.start for s in mel_slices]


def test_partial_layout(encoder: SpeakerEncoder) -> None:
    # Partials start every round(16000 / 1.3 / 160) = 77 frames; short clips still give one.
    assert encoder.partial_starts(100) == [0]
    assert encoder.partial_starts(5 * 16_000) == [0, 77, 154, 231, 308]


def test_embedding_matches_resemblyzer(
    encoder: SpeakerEncoder, reference_encoder: Any, male_preprocessed: np.ndarray
) -> None:
    theirs = reference_encoder.embed_utterance(male_preprocessed)
    ours = encoder.embed_utterance(male_preprocessed)
    assert ours.shape == (SPEAKER_EMBED_DIM,) and ours.dtype == np.float32
    assert float(np.linalg.norm(ours)) == pytest.approx(1.0, abs=1e-6)
    assert float(np.max(np.abs(ours - theirs))) <= PARITY_ATOL


def test_partial_embeddings_match_resemblyzer(
    encoder: SpeakerEncoder, reference_encoder: Any, male_preprocessed: np.ndarray
) -> None:
    _, theirs, _ = reference_encoder.embed_utterance(male_preprocessed, return_partials=True)
    ours = encoder.embed_partials(male_preprocessed)
    assert ours.shape == theirs.shape
    assert float(np.max(np.abs(ours - theirs))) <= PARITY_ATOL


def test_same_voice_is_closer_than_another_voice(encoder: SpeakerEncoder) -> None:
    male = load_audio(MALE, SPEAKER_SAMPLE_RATE)
    half = male.shape[0] // 2
    first, second = encoder.embed_reference(male[:half], 16_000), encoder.embed_reference(male[half:], 16_000)
    female = encoder.embed_reference(load_audio(FEMALE, SPEAKER_SAMPLE_RATE), 16_000)
    same = float(first @ second)
    different = max(float(first @ female), float(second @ female))
    assert same > different + 0.15, (same, different)


def test_embed_reference_resamples_and_levels(encoder: SpeakerEncoder) -> None:
    wav16k = load_audio(MALE, SPEAKER_SAMPLE_RATE)
    wav24k = load_audio(MALE, 24_000)
    direct = encoder.embed_reference(wav16k, 16_000)
    assert float(direct @ encoder.embed_reference(wav24k, 24_000)) > 0.995
    # A quiet clip is raised to -30 dBFS first, as resemblyzer's preprocessing does.
    quiet = wav16k * np.float32(0.01)
    leveled = quiet * np.float32(db_to_gain(-30.0 - rms_dbfs(quiet)))
    np.testing.assert_allclose(encoder.embed_reference(quiet, 16_000), encoder.embed_utterance(leveled), atol=1e-6)


def test_rejects_empty_audio(encoder: SpeakerEncoder) -> None:
    with pytest.raises(ValueError, match="non-empty mono"):
        encoder.embed_utterance(np.zeros(0, np.float32))
