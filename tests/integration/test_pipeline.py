"""The whole pipeline on a tiny random-weight model: frontend → condition → acoustic → vocoder → chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rtvox.audio import write_audio
from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, SAMPLE_RATE
from rtvox.errors import AudioInputError, InputError, TextError, VoiceNotFoundError
from rtvox.runtime import Synthesizer

DATA = Path(__file__).resolve().parents[1] / "data"
MALE_CLIP = DATA / "speech_en_male_16k.wav"
FEMALE_CLIP = DATA / "speech_en_female_16k.wav"
MIXED = "我们下周去New York出差，3点到。Hello world, this is a test of the streaming pipeline."


def test_stream_yields_typed_chunks_covering_the_text(synth: Synthesizer) -> None:
    front = synth.frontend.process(MIXED)
    chunks = list(synth.stream(MIXED))
    assert len(chunks) == len(front.chunks) >= 2
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert [c.is_last for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert "".join(c.text for c in chunks).replace(" ", "") == "".join(ch.text for ch in front.chunks).replace(" ", "")
    for chunk in chunks:
        assert chunk.sample_rate == SAMPLE_RATE
        assert chunk.audio.dtype == np.float32 and np.all(np.isfinite(chunk.audio))
        assert np.max(np.abs(chunk.audio)) <= 1.0
        # audio length is exactly the frames the length regulator produced, times the hop
        assert len(chunk.audio) == sum(chunk.durations) * HOP_LENGTH
        assert len(chunk.durations) == len(chunk.phonemes)


def test_synthesize_equals_concatenated_stream(synth: Synthesizer) -> None:
    whole = synth.synthesize(MIXED, voice="ben")
    streamed = np.concatenate([c.audio for c in synth.stream(MIXED, voice="ben")])
    np.testing.assert_array_equal(whole.audio, streamed)
    assert whole.seconds == pytest.approx(len(streamed) / SAMPLE_RATE)


@pytest.mark.parametrize("seconds", [0.7, 2.0, 3.33, 9.5])
def test_exact_duration_across_chunks(synth: Synthesizer, seconds: float) -> None:
    result = synth.synthesize(MIXED, duration=seconds)
    assert len(result.chunks) >= 2
    assert len(result.audio) == round(seconds * FRAMES_PER_SECOND) * HOP_LENGTH
    assert abs(result.seconds - seconds) <= 0.5 / FRAMES_PER_SECOND + 1e-9


def test_voice_and_emotion_change_the_audio(synth: Synthesizer) -> None:
    text = "今天天气很好。"
    base = synth.synthesize(text, voice="anna").audio
    other_voice = synth.synthesize(text, voice="ben").audio
    happy = synth.synthesize(text, voice="anna", emotion="happy").audio
    no_alpha = synth.synthesize(text, voice="anna", emotion="happy", emotion_alpha=0.0).audio
    neutral_no_alpha = synth.synthesize(text, voice="anna", emotion_alpha=0.0).audio
    assert not np.array_equal(base, other_voice)
    assert not np.array_equal(base, happy)
    # α = 0 removes the emotion part of the condition entirely, whatever the label
    np.testing.assert_array_equal(no_alpha, neutral_no_alpha)


def test_emotion_reference_clip_is_used(synth: Synthesizer) -> None:
    a = synth.synthesize("你好。", emotion_ref=FEMALE_CLIP).audio
    b = synth.synthesize("你好。", emotion_ref=MALE_CLIP).audio
    assert not np.array_equal(a, b)


def test_clone_voice_persists_and_is_usable(synth: Synthesizer, tiny_model: Path) -> None:
    voice = synth.clone_voice("narrator", MALE_CLIP)
    assert not voice.builtin
    assert float(np.linalg.norm(voice.embedding)) == pytest.approx(1.0, abs=1e-3)
    again = Synthesizer(synth.model_dir, device="cpu")
    assert "narrator" in [v.name for v in again.voices.list()]
    np.testing.assert_allclose(again.voices.get("narrator").embedding, voice.embedding, atol=1e-6)
    assert again.synthesize("Hi there.", voice="narrator").seconds > 0
    # the same clip again is a cache hit with the same embedding; different speakers differ
    hits = synth.embedding_cache.stats()["local"]["hits"]
    np.testing.assert_allclose(synth.embed_speaker(MALE_CLIP.read_bytes()), voice.embedding, atol=1e-5)
    assert synth.embedding_cache.stats()["local"]["hits"] == hits + 1
    assert float(np.dot(synth.embed_speaker(FEMALE_CLIP), voice.embedding)) < 0.99


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("", TextError, "nothing to speak"),
        ("   \n\t", TextError, "nothing to speak"),
        ("？！。，...", TextError, "nothing to speak"),
        ("还[xyz9]钱", TextError, "xyz9"),
    ],
)
def test_bad_text_is_refused_clearly(synth: Synthesizer, text: str, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle):
        list(synth.stream(text))


def test_emoji_and_unsupported_scripts_are_skipped_not_crashed(synth: Synthesizer) -> None:
    result = synth.synthesize("你好😀 Привет world")
    assert result.seconds > 0


def test_unknown_voice_names_known_ones(synth: Synthesizer) -> None:
    with pytest.raises(VoiceNotFoundError, match="known voices: anna, ben"):
        synth.synthesize("你好", voice="nobody")


def test_bad_references_are_refused(synth: Synthesizer, tmp_path: Path) -> None:
    base = tmp_path
    text_file = base / "notes.wav"
    text_file.write_text("this is not audio")
    with pytest.raises(AudioInputError, match="could not decode"):
        synth.clone_voice("x", text_file)
    silent = base / "silent.wav"
    write_audio(silent, np.zeros(SAMPLE_RATE * 5, np.float32), SAMPLE_RATE)
    with pytest.raises(AudioInputError):
        synth.clone_voice("y", silent)
    short = base / "short.wav"
    write_audio(short, (0.3 * np.sin(np.arange(SAMPLE_RATE) / 7)).astype(np.float32), SAMPLE_RATE)
    with pytest.raises(AudioInputError, match="short"):
        synth.clone_voice("z", short)
    with pytest.raises(AudioInputError, match="does not exist"):
        synth.clone_voice("w", base / "missing.wav")
    with pytest.raises(InputError, match="invalid voice name"):
        synth.clone_voice("../evil", MALE_CLIP)
    assert [v.name for v in synth.voices.list() if not v.builtin] == []


def test_text_with_nothing_speakable_is_a_text_error(synth: Synthesizer) -> None:
    with pytest.raises(TextError, match="nothing to speak") as info:
        synth.synthesize("Привет 😀")
    assert info.value.param == "input"


def test_fused_frame_kernels_apply_to_the_captured_pipeline_only(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asked for on eager engines (the CPU's serving path) they are not used, and health says so
    monkeypatch.setenv("RTVOX_PIPELINE_FUSED", "1")
    synth = Synthesizer(tiny_model, device="cpu", backend="eager")
    assert synth.fused_frames is False and synth.pipeline is None
    assert Synthesizer(tiny_model, device="cpu", backend="eager", fused_frames=True).fused_frames is False
