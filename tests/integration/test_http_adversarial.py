"""Careless and hostile HTTP clients against the real server (tiny random model, real uvicorn): wrong JSON types
are 400s as OpenAI answers them, a voice from a text prompt is refused with the reason, and a client that leaves
mid-stream costs nothing."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from .server_harness import LiveServer

DATA = Path(__file__).resolve().parents[1] / "data"
SPEECH = {"model": "tts-1", "voice": "alloy", "input": "Hello there. 你好。", "response_format": "pcm"}


@pytest.fixture(scope="module")
def live(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("adversarial-voices")) as server:
        yield server


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


def error_of(response: httpx.Response, status: int) -> dict[str, str | None]:
    assert response.status_code == status, response.text
    error: dict[str, str | None] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    ("path", "fields", "param"),
    [
        ("/v1/audio/speech", {"speed": True}, "speed"),  # was read as 1.0
        ("/v1/audio/speech", {"speed": "1.5"}, "speed"),  # was read as 1.5
        ("/v1/tts", {"speed": "2"}, "speed"),
        ("/v1/tts", {"seed": "7"}, "seed"),
        ("/v1/tts", {"seed": 1.0}, "seed"),
        ("/v1/tts", {"pitch_scale": False}, "pitch_scale"),
        ("/v1/tts", {"emotion": "happy", "emotion_alpha": "1"}, "emotion_alpha"),
        ("/v1/tts", {"duration": "2"}, "duration"),
        ("/v1/tts", {"stream_format": "json", "timestamps": "true"}, "timestamps"),
    ],
)
def test_numbers_and_flags_of_the_wrong_json_type_are_400(
    http: httpx.Client, path: str, fields: dict[str, object], param: str
) -> None:
    base: dict[str, object] = dict(SPEECH) if path == "/v1/audio/speech" else {"text": "hello", "voice": "mei"}
    error = error_of(http.post(path, json={**base, **fields}), 400)
    assert error["param"] == param
    assert error["message"] and param in error["message"]


def test_integer_speed_is_still_a_number(http: httpx.Client) -> None:
    response = http.post("/v1/audio/speech", json={**SPEECH, "speed": 2})
    assert response.status_code == 200
    assert len(response.content) > 0 and len(response.content) % 2 == 0


def test_a_prompt_voice_is_refused_with_the_reason(http: httpx.Client) -> None:
    # OpenAI's client can ask for a voice made from a text prompt; it used to get "'audio_sample' is required"
    form = {"name": "deep", "type": "prompt", "prompt": "a deep calm voice"}
    error = error_of(http.post("/v1/audio/voices", data=form, files={"x": ("x", b"", "text/plain")}), 400)
    assert error["param"] == "type"
    assert "text prompt" in str(error["message"])
    error = error_of(http.post("/v1/audio/voices", data={**form, "type": "other"}, files={"x": ("", b"")}), 400)
    assert error["param"] == "type"


def test_openai_client_clones_with_an_explicit_type_and_uses_the_clone(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=60)
    clip = (DATA / "speech_en_female_16k.wav").read_bytes()
    voice = client.audio.voices.create(
        name="../../etc/passwd", audio_sample=("a.wav", clip, "audio/wav"), consent="cons_x", type="audio_sample"
    )
    assert voice.id.startswith("voice_") and "/" not in voice.id
    pcm = client.audio.speech.create(model="tts-1", voice={"id": voice.id}, input="hello", response_format="pcm")
    assert len(pcm.content) > 0 and len(pcm.content) % 2 == 0
    assert client.audio.voices.delete(voice.id).deleted
    with pytest.raises(openai.BadRequestError, match="unknown voice"):
        client.audio.speech.create(model="tts-1", voice={"id": voice.id}, input="hello")


@pytest.mark.parametrize(("fmt", "stream_format"), [("pcm", "audio"), ("mp3", "audio"), ("aac", "sse")])
def test_a_client_leaving_mid_stream_leaves_the_server_serving(
    live: LiveServer, http: httpx.Client, fmt: str, stream_format: str
) -> None:
    body = json.dumps(
        {**SPEECH, "input": "A long text to speak. " * 60, "response_format": fmt, "stream_format": stream_format}
    ).encode()
    host, port = live.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        head = "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        raw.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert raw.recv(64).startswith(b"HTTP/1.1 200")
    response = http.post("/v1/audio/speech", json=SPEECH)
    assert response.status_code == 200
    assert np.frombuffer(response.content, np.int16).size > 0
    deadline = time.monotonic() + 30  # the abandoned request is cancelled, not left to run
    while http.get("/health").json()["service"]["running"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert http.get("/health").json()["service"]["running"] == 0


KEY = "adversarial-key"


@pytest.fixture(scope="module")
def keyed(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("keyed-voices"), api_keys=(KEY,)) as server:
        yield server


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/v1/audio/speech", b'{"model": "tts-1", "voice":', "application/json"),  # malformed JSON
        ("/v1/tts", b'{"text": "\xff"}', "application/json"),  # not UTF-8
        ("/v1/audio/voices", b"garbage", "multipart/form-data"),  # multipart without a boundary
    ],
)
def test_a_client_without_a_key_gets_401_before_any_word_on_its_body(
    keyed: LiveServer, path: str, body: bytes, content_type: str
) -> None:
    # FastAPI parses a body before the route's key check runs: these were 400s telling a keyless client about its body
    response = httpx.post(f"{keyed.url}{path}", content=body, headers={"Content-Type": content_type}, timeout=30)
    assert error_of(response, 401)["code"] == "missing_api_key"
    assert response.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(
        f"{keyed.url}{path}",
        content=body,
        headers={"Content-Type": content_type, "Authorization": "Bearer wrong"},
        timeout=30,
    )
    assert error_of(wrong, 401)["code"] == "invalid_api_key"
    keyed_response = httpx.post(
        f"{keyed.url}{path}",
        content=body,
        headers={"Content-Type": content_type, "Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert error_of(keyed_response, 400)["message"]


def test_built_in_names_in_any_case_and_their_openai_names_cannot_be_deleted(http: httpx.Client) -> None:
    builtin = http.get("/v1/audio/voices").json()["data"][0]["id"]  # the list starts with the built-ins
    for name in (builtin.upper(), builtin.capitalize(), "ALLOY", "Nova"):
        assert http.post("/v1/audio/speech", json={**SPEECH, "voice": name}).status_code == 200, name
    for name in (builtin, builtin.upper(), "alloy", "NOVA"):
        response = http.delete(f"/v1/audio/voices/{name}")
        assert response.status_code == 400, (name, response.text)
        assert "is a built-in voice and cannot be deleted" in response.json()["error"]["message"]
    assert http.delete("/v1/audio/voices/voice_0123456789abcdef").status_code == 404  # an unknown clone id
