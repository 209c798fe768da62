"""POST /v1/audio/speech and /v1/tts through the app (fake service over a tiny random model)."""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from rtvox.audio import decode_audio
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.server.stretch import time_stretch

from .conftest import FakeService

DATA = Path(__file__).resolve().parents[2] / "data"
TEXT = "Hello world, 你好。"


def speech(client: TestClient, **fields: object) -> object:
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy"} | fields
    return client.post("/v1/audio/speech", json=body)


def assert_openai_error(response: object, status: int, param: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    error = response.json()["error"]  # type: ignore[attr-defined]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    return error


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "opus", "aac"])
def test_formats_decode(client: TestClient, fmt: str) -> None:
    response = speech(client, response_format=fmt)
    assert response.status_code == 200, response.text
    wav, sr = decode_audio(response.content)
    assert sr in (SAMPLE_RATE, 48_000)
    assert len(wav) > 0


def test_pcm_is_raw_24k_s16le_of_the_model_length(client: TestClient, fake_service: FakeService) -> None:
    response = speech(client, response_format="pcm")
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/pcm"
    expected = fake_service.synthesizer.synthesize(TEXT, voice="anna").audio
    assert len(response.content) == 2 * len(expected)
    pcm = np.frombuffer(response.content, "<i2").astype(np.float32) / 32767
    np.testing.assert_allclose(pcm, np.clip(expected, -1, 1), atol=2 / 32767)


def test_wav_header(client: TestClient) -> None:
    data = speech(client, response_format="wav").content
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert int.from_bytes(data[24:28], "little") == SAMPLE_RATE


@pytest.mark.parametrize("speed", [0.25, 0.5, 2.0, 4.0])
def test_speed_range_maps_to_model_speed_and_stretch(
    client: TestClient, fake_service: FakeService, speed: float
) -> None:
    response = speech(client, response_format="pcm", speed=speed)
    assert response.status_code == 200
    model_speed = min(max(speed, 0.5), 2.0)
    assert fake_service.requests[-1].speed == pytest.approx(model_speed)
    chunks = list(fake_service.synthesizer.stream(TEXT, voice="anna", speed=model_speed))
    expected = sum(len(time_stretch(c.audio, speed / model_speed)) for c in chunks)
    assert len(response.content) == 2 * expected


def test_sse_events(client: TestClient) -> None:
    response = speech(client, response_format="pcm", stream_format="sse")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    assert set(events[-1]["usage"]) == {"input_tokens", "output_tokens", "total_tokens"}
    deltas = [e for e in events[:-1]]
    assert deltas and all(e["type"] == "speech.audio.delta" for e in deltas)
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(audio) == len(speech(client, response_format="pcm").content)


def test_voice_names_aliases_and_objects(client: TestClient, fake_service: FakeService) -> None:
    assert speech(client, voice="ben").status_code == 200
    assert fake_service.requests[-1].voice == "ben"
    for name in ("alloy", "ash", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "ballad"):
        assert speech(client, voice=name, response_format="pcm").status_code == 200
        assert fake_service.requests[-1].voice in ("anna", "ben")
    assert speech(client, voice={"id": "ben"}).status_code == 200
    assert_openai_error(speech(client, voice={"id": "voice_doesnotexist"}), 400, "voice")


def test_instructions_set_emotion(client: TestClient, fake_service: FakeService) -> None:
    assert speech(client, instructions="say it very angrily").status_code == 200
    request = fake_service.requests[-1]
    assert request.emotion == "angry" and request.emotion_alpha == pytest.approx(1.5)
    assert speech(client, instructions="用开心的语气").status_code == 200
    assert fake_service.requests[-1].emotion == "happy"
    assert speech(client, instructions="read it like a news anchor").status_code == 200
    assert fake_service.requests[-1].emotion is None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"speed": 4.5}, "speed"),
        ({"speed": 0.1}, "speed"),
        ({"response_format": "ogg"}, "response_format"),
        ({"stream_format": "chunked"}, "stream_format"),
        ({"input": "x" * 4097}, "input"),
        ({"input": ""}, "input"),
        ({"voice": 42}, "voice"),
        ({"model": "whisper-1"}, "model"),
        ({"voice": "../../etc/passwd"}, "voice"),
        ({"input": "。。。！"}, "input"),
    ],
)
def test_bad_requests_are_4xx_with_openai_errors(client: TestClient, fields: dict[str, object], param: str) -> None:
    response = speech(client, **fields)
    assert 400 <= response.status_code < 500
    assert_openai_error(response, response.status_code, param)


def test_missing_fields_and_bad_json(client: TestClient) -> None:
    assert_openai_error(client.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy"}), 400, "input")
    response = client.post("/v1/audio/speech", content=b"{not json", headers={"content-type": "application/json"})
    assert_openai_error(response, 400)
    response = client.post("/v1/audio/speech", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert_openai_error(response, 400)
    response = client.post("/v1/audio/speech", content=b"input=hi", headers={"content-type": "text/plain"})
    assert_openai_error(response, 415)
    wrong_method = client.get("/v1/audio/speech")
    error = assert_openai_error(wrong_method, 405)  # the message says what was asked and what to use instead
    assert error["message"] == "GET is not allowed on /v1/audio/speech; use POST (see /docs)"
    assert wrong_method.headers["allow"] == "POST"
    both = client.put("/v1/audio/voices")  # two routes share this path: Allow names both methods
    assert both.status_code == 405 and both.headers["allow"] == "GET, HEAD, POST"
    assert "use GET, HEAD, POST" in both.json()["error"]["message"]
    error = assert_openai_error(client.get("/v1/nothing-here"), 404)
    assert "GET /v1/nothing-here" in str(error["message"])
    error = assert_openai_error(client.get("/v1/" + "x" * 5000), 404)
    assert len(str(error["message"])) < 300


def test_validation_messages_name_the_shape_that_was_sent(client: TestClient) -> None:
    # `voice` is a name or {"id": ...}: a bad object is not "a valid string", and its two failed shapes are one
    # problem, not two
    for voice, message in (
        ({}, "'voice.id' is required"),
        ({"id": 5}, "'voice.id': Input should be a valid string"),
        ({"id": "v" * 65}, "'voice.id': String should have at most 64 characters"),
        (7, "'voice': Input should be a valid string"),
    ):
        assert assert_openai_error(speech(client, voice=voice), 400, "voice")["message"] == message
    body = {"voice": 7, "speed": 9}  # besides the missing `model`: no input, a bad voice, a bad speed
    error = assert_openai_error(client.post("/v1/audio/speech", json=body), 400, "model")
    assert error["message"] == "'model' is required (and 3 more problems)"


def test_queue_full_is_429_with_retry_after(fake_service: FakeService) -> None:
    from .conftest import make_client

    fake_service.max_queue = 0
    with make_client(fake_service) as client:
        response = speech(client)
    error = assert_openai_error(response, 429)
    assert error["code"] == "queue_full"
    assert int(response.headers["retry-after"]) >= 1


def test_models(client: TestClient) -> None:
    body = client.get("/v1/models").json()
    ids = [m["id"] for m in body["data"]]
    assert body["object"] == "list" and "tts-1" in ids and "tiny" in ids
    assert speech(client, model="tiny").status_code == 200
    one = client.get("/v1/models/tts-1").json()  # what openai's client.models.retrieve asks
    assert one["id"] == "tts-1" and one["object"] == "model" and one["created"] == body["data"][0]["created"]
    assert_openai_error(client.get("/v1/models/gpt-9"), 404, "model")


# ---------------------------------------------------------------------- native /v1/tts
def tts(client: TestClient, **fields: object) -> object:
    return client.post("/v1/tts", json={"text": TEXT} | fields)


def test_tts_audio_stream_with_controls(client: TestClient, fake_service: FakeService) -> None:
    response = tts(
        client, voice="ben", emotion="sad", emotion_alpha=1.7, speed=1.3, pitch_scale=1.2, energy_scale=0.8, seed=7
    )
    assert response.status_code == 200
    assert response.content[:4] == b"RIFF"
    request = fake_service.requests[-1]
    assert (request.voice, request.emotion, request.emotion_alpha, request.speed) == ("ben", "sad", 1.7, 1.3)
    assert (request.pitch_scale, request.energy_scale, request.seed) == (1.2, 0.8, 7)


def test_tts_emotion_label_ignores_case_and_spaces(client: TestClient, fake_service: FakeService) -> None:
    assert tts(client, emotion=" Angry ").status_code == 200
    assert fake_service.requests[-1].emotion == "angry"
    assert_openai_error(tts(client, emotion="ecstatic"), 400, "emotion")


def test_tts_exact_duration(client: TestClient) -> None:
    response = tts(client, duration=1.5, response_format="pcm")
    assert response.status_code == 200
    frames = round(1.5 * SAMPLE_RATE / HOP_LENGTH)
    assert len(response.content) == 2 * frames * HOP_LENGTH


def test_tts_json_with_timestamps(client: TestClient) -> None:
    response = tts(client, stream_format="json", timestamps=True, response_format="wav", speed=3.0)
    assert response.status_code == 200
    body = response.json()
    data = base64.b64decode(body["audio"])
    wav, sr = decode_audio(data)
    assert sr == SAMPLE_RATE and body["duration"] == pytest.approx(len(wav) / sr, abs=1e-3)
    with wave.open(io.BytesIO(data)) as reader:  # the whole file: real sizes in its header, not streaming ones
        assert reader.getnframes() == len(wav) and int.from_bytes(data[4:8], "little") == len(data) - 8
    assert [w["text"] for w in body["words"]] == ["Hello", "world", "你好"]
    assert body["phonemes"][-1]["end"] == pytest.approx(body["duration"], abs=1e-3)
    assert all(w["start"] <= w["end"] for w in body["words"])


def test_tts_sse_with_timestamps(client: TestClient) -> None:
    response = tts(client, stream_format="sse", timestamps=True, response_format="pcm")
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    words = [w["text"] for e in events if e["type"] == "speech.audio.delta" for w in e.get("words", [])]
    assert words == ["Hello", "world", "你好"]


def test_tts_references(client: TestClient, fake_service: FakeService) -> None:
    clip = base64.b64encode((DATA / "speech_en_female_16k.wav").read_bytes()).decode()
    response = tts(client, speaker_reference=clip, emotion_reference=clip, response_format="pcm")
    assert response.status_code == 200, response.text
    request = fake_service.requests[-1]
    assert request.voice is None and request.speaker_embedding is not None and request.emotion_ref is not None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"voice": "anna", "speaker_reference": "AAAA"}, "speaker_reference"),
        ({"emotion": "happy", "emotion_reference": "AAAA"}, "emotion_reference"),
        ({"timestamps": True}, "timestamps"),
        ({"emotion": "bored"}, "emotion"),
        ({"emotion_alpha": 2.5}, "emotion_alpha"),
        ({"duration": 0.01}, "duration"),
        ({"text": "Far too many phonemes for a fifth of a second. " * 4, "duration": 0.2}, "duration"),
        ({"speaker_reference": "not base64!"}, "speaker_reference"),
        ({"speaker_reference": base64.b64encode(b"RIFF junk").decode()}, "speaker_reference"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"seed": -1}, "seed"),
    ],
)
def test_tts_bad_requests(client: TestClient, fields: dict[str, object], param: str) -> None:
    response = tts(client, **fields)
    assert 400 <= response.status_code < 500
    assert_openai_error(response, response.status_code, param)


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize("text", ["。。。！", "😀🎉", "还[huan9]钱", "   "])
def test_tts_text_errors_name_the_text_field(client: TestClient, text: str, timestamps: bool) -> None:
    # the runtime calls the text `input` (OpenAI's field); /v1/tts has no such field: its errors name `text`
    fields: dict[str, object] = {"stream_format": "json", "timestamps": True} if timestamps else {}
    assert_openai_error(tts(client, text=text, **fields), 400, "text")


def test_tts_short_reference_clip_is_400(client: TestClient) -> None:
    wav = (DATA / "speech_en_female_16k.wav").read_bytes()[: 44 + 16000 * 2]  # 1 s: under the 3 s minimum
    response = tts(client, speaker_reference=base64.b64encode(wav).decode())
    assert_openai_error(response, 400, "speaker_reference")


@pytest.mark.parametrize("signal", ["noise", "tone"])
def test_tts_reference_that_is_not_speech_is_400(client: TestClient, signal: str) -> None:
    t = np.arange(5 * SAMPLE_RATE) / SAMPLE_RATE
    wav = 0.1 * np.random.default_rng(0).standard_normal(t.shape[0]) if signal == "noise" else 0.3 * np.sin(880 * t)
    buffer = io.BytesIO()
    sf.write(buffer, wav.astype(np.float32), SAMPLE_RATE, format="WAV")
    response = tts(client, speaker_reference=base64.b64encode(buffer.getvalue()).decode())
    assert_openai_error(response, 400, "speaker_reference")
    assert ("no voiced speech" if signal == "noise" else "steady tone") in response.json()["error"]["message"]


def test_failure_after_the_first_chunk_ends_sse_with_an_error_event(
    client: TestClient, fake_service: FakeService
) -> None:
    from rtvox.runtime.sched_types import DeadlineExceededError

    fake_service.fail_after_first = DeadlineExceededError(1.0)
    response = speech(client, response_format="pcm", stream_format="sse")
    assert response.status_code == 200  # the status went out with the first audio
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error" and events[-1]["status"] == 504
    assert set(events[-1]["error"]) == {"message", "type", "param", "code"}


def test_text_left_unspoken_is_named_in_a_header(client: TestClient) -> None:
    import json

    partly = speech(client, input="Hello there, こんにちは.", response_format="wav")
    assert partly.status_code == 200
    warnings = json.loads(partly.headers["x-rtvox-warnings"])
    assert any("こんにちは" in w for w in warnings), warnings
    assert "x-rtvox-warnings" not in speech(client, response_format="wav").headers
    document = tts(client, text="Hello there, こんにちは.", stream_format="json")
    assert document.json()["warnings"] == warnings
    assert "warnings" not in tts(client, stream_format="json").json()


def test_non_finite_numbers_and_unknown_voice_labels_get_errors_that_say_so(client: TestClient) -> None:
    for raw in (
        '{"model": "tts-1", "input": "hi", "voice": "alloy", "speed": NaN}',
        '{"text": "hi", "speed": Infinity}',
    ):
        url = "/v1/audio/speech" if '"model"' in raw else "/v1/tts"
        response = client.post(url, content=raw, headers={"content-type": "application/json"})
        error = assert_openai_error(response, 400, "speed")
        assert "finite" in str(error["message"])
    for name in ("Zoé", "my voice", "../etc"):  # labels a clone may carry: unknown, not "invalid"
        error = assert_openai_error(speech(client, voice=name), 400, "voice")
        assert error["code"] == "voice_not_found" and "unknown voice" in str(error["message"])
    for response in (speech(client, voice="v" * 100_000), tts(client, voice="v" * 100_000)):  # not quoted back
        error = assert_openai_error(response, 400, "voice")
        assert len(str(error["message"])) < 500 and "128 characters" in str(error["message"])
