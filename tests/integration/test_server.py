"""The HTTP service end to end: real TTSService on a tiny random model, real uvicorn, the official openai client,
200 concurrent requests, and voices shared through a real Redis."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from rtvox.audio import decode_audio
from rtvox.constants import SAMPLE_RATE
from rtvox.runtime.service import ServiceConfig

from .server_harness import REDIS_SERVER, LiveServer, RedisProcess

DATA = Path(__file__).resolve().parents[1] / "data"
KEY = "test-key"
TEXT = "你好，欢迎使用 rtvox。This is streaming speech in Chinese and English, spoken in several chunks."


@pytest.fixture(scope="module")
def live(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("voices"), api_keys=(KEY,)) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=KEY, max_retries=0, timeout=60)


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
def test_openai_client_formats(client: openai.OpenAI, fmt: str) -> None:
    response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt)  # type: ignore[arg-type]
    wav, sr = decode_audio(response.content)
    assert sr == SAMPLE_RATE
    assert len(wav) > SAMPLE_RATE // 10


def test_openai_client_streaming(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="nova", input=TEXT, response_format="pcm", instructions="say it happily"
    ) as response:
        assert response.headers.get("transfer-encoding") == "chunked"
        parts = list(response.iter_bytes())
    pcm = b"".join(parts)
    assert len(pcm) % 2 == 0 and len(pcm) > 0
    reference = client.audio.speech.create(
        model="tts-1", voice="nova", input=TEXT, response_format="pcm", instructions="用开心的语气"
    )
    assert len(reference.content) == len(pcm)  # the same text, voice, emotion and speed: the same length


def test_openai_client_sse(client: openai.OpenAI) -> None:
    response = client.audio.speech.create(
        model="tts-1", voice="echo", input=TEXT, response_format="pcm", stream_format="sse", speed=3.0
    )
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][-1] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert len(audio) > 0 and len(audio) % 2 == 0


def test_openai_client_clone_use_delete(client: openai.OpenAI) -> None:
    with (DATA / "speech_en_female_16k.wav").open("rb") as clip:
        voice = client.audio.voices.create(name="Alice", audio_sample=clip, consent="test")
    assert voice.id.startswith("voice_") and voice.name == "Alice" and voice.object == "audio.voice"
    speech = client.audio.speech.create(model="tts-1", voice={"id": voice.id}, input="Hello.", response_format="wav")
    assert decode_audio(speech.content)[0].size > 0
    deleted = client.audio.voices.delete(voice.id)
    assert deleted.deleted and deleted.id == voice.id
    with pytest.raises(openai.NotFoundError):
        client.audio.voices.delete(voice.id)


def test_openai_client_errors(client: openai.OpenAI, live: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as bad_speed:
        client.audio.speech.create(model="tts-1", voice="alloy", input="hi", speed=5.0)
    assert bad_speed.value.body["param"] == "speed"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad_voice:  # as OpenAI answers a voice it does not have
        client.audio.speech.create(model="tts-1", voice="nobody", input="hi")
    assert bad_voice.value.body["param"] == "voice" and bad_voice.value.body["code"] == "voice_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.audio.speech.create(model="tts-1", voice="alloy", input="x" * 4097)
    with pytest.raises(openai.BadRequestError):
        client.audio.speech.create(model="dall-e-3", voice="alloy", input="hi")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="wrong", max_retries=0).audio.speech.create(
            model="tts-1", voice="alloy", input="hi"
        )


def test_native_tts_over_http(live: LiveServer) -> None:
    clip = base64.b64encode((DATA / "speech_en_male_16k.wav").read_bytes()).decode()
    body = {
        "text": TEXT,
        "speaker_reference": clip,
        "emotion": "surprised",
        "emotion_alpha": 1.5,
        "duration": 4.0,
        "pitch_scale": 1.2,
        "stream_format": "json",
        "timestamps": True,
        "response_format": "flac",
    }
    response = httpx.post(f"{live.url}/v1/tts", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert response.status_code == 200, response.text
    result = response.json()
    wav, sr = decode_audio(base64.b64decode(result["audio"]))
    assert len(wav) / sr == pytest.approx(4.0, abs=0.02)
    assert result["words"] and result["phonemes"][-1]["end"] == pytest.approx(4.0, abs=0.02)


def test_word_timestamps_cover_every_chunk_the_service_cuts(live: LiveServer) -> None:
    """The server plans words with the service's own chunking (on the CPU: later chunks of at most 96 phonemes and
    a floor under the first, where the library cuts at 200 and has none), so every word of a long text gets times,
    in order, not only those of the chunks whose cuts happen to agree."""
    text = "Yes, " + "we should leave before the rain starts because the road home is long and dark " * 4
    body = {"text": text, "stream_format": "json", "timestamps": True, "response_format": "wav"}
    response = httpx.post(f"{live.url}/v1/tts", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
    assert response.status_code == 200, response.text
    words = response.json()["words"]
    assert [w["text"].lower() for w in words] == [w.strip(",").lower() for w in text.split()]
    assert all(a["end"] <= b["start"] + 1e-3 for a, b in itertools.pairwise(words))


def test_client_disconnect_cancels_the_request(live: LiveServer) -> None:
    before = live.service.stats()["requests"]["cancelled"]
    text = "这是一个很长的句子，用来测试客户端断开连接以后服务器会不会取消请求。" * 60
    body = {"text": text, "speed": 0.5, "response_format": "pcm"}
    headers = {"Authorization": f"Bearer {KEY}"}
    with (
        httpx.Client(base_url=live.url, headers=headers, timeout=60) as http,
        http.stream("POST", "/v1/tts", json=body) as r,
    ):
        assert r.status_code == 200
        next(r.iter_raw())
    # leaving the block closed the connection with most of the audio still to come
    deadline = time.monotonic() + 30
    while live.service.stats()["requests"]["cancelled"] == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.service.stats()["requests"]["cancelled"] == before + 1
    assert live.service.stats()["admitted"] == 0


class ScriptedService:
    """The SpeechService protocol with no scheduler: a subclass's `stream` scripts the chunks (and failures)."""

    def __init__(self, model: Path, voices_dir: Path) -> None:
        from rtvox.runtime import Synthesizer

        self.synthesizer = Synthesizer(model, device="cpu", voices_dir=voices_dir)
        self.ready = True

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def health(self) -> dict[str, object]:
        return {}

    def stats(self) -> dict[str, object]:
        return {}

    async def synthesize(self, request: object, *, deadline_s: float | None = None, internal: bool = False) -> object:
        raise NotImplementedError


def test_audio_leaves_before_synthesis_ends(tiny_model: Path, tmp_path: Path) -> None:
    """The first chunk's bytes reach the client while the runtime is still held on the second chunk."""
    from rtvox.runtime.types import AudioChunk, SynthesisRequest
    from rtvox.server import create_app

    gate = threading.Event()

    class HeldService(ScriptedService):
        async def stream(self, request: SynthesisRequest, *, deadline_s: float | None = None):  # type: ignore[no-untyped-def]
            audio = np.full(2400, 0.25, np.float32)
            yield AudioChunk(0, audio, "first", False)
            await asyncio.to_thread(gate.wait, 30)
            yield AudioChunk(1, audio, "second", True)

    with LiveServer.around(create_app(HeldService(tiny_model, tmp_path))) as server:  # type: ignore[arg-type]
        body = {"model": "tts-1", "voice": "alloy", "input": "Hello.", "response_format": "pcm"}
        with (
            httpx.Client(base_url=server.url, timeout=60) as http,
            http.stream("POST", "/v1/audio/speech", json=body) as r,
        ):
            pieces = r.iter_raw()
            first = next(pieces)
            assert len(first) == 2 * 2400 and not gate.is_set()  # arrived while the second chunk was held
            gate.set()
            rest = b"".join(pieces)
        assert len(first) + len(rest) == 4 * 2400


def test_operator_endpoints(live: LiveServer) -> None:
    assert httpx.get(f"{live.url}/health").json()["status"] == "ok"
    assert httpx.get(f"{live.url}/ready").json()["ready"] is True
    metrics = httpx.get(f"{live.url}/metrics").text
    assert "rtvox_time_to_first_audio_seconds_count" in metrics and "rtvox_batch_size_bucket" in metrics
    assert "text/html" in httpx.get(f"{live.url}/").headers["content-type"]


@pytest.mark.parametrize("max_queue", [256, 128])
def test_200_concurrent_requests(tiny_model: Path, tmp_path: Path, max_queue: int) -> None:
    """No 5xx and no lost request; 429 (with Retry-After) is allowed once the queue is full. With the default
    queue (256) all 200 are served; with 128 the rest are turned away politely."""
    texts = [f"Request number {i}. 第{i}个请求。" for i in range(200)]
    service = ServiceConfig(fallback_device=None, max_queue=max_queue)
    with LiveServer(tiny_model, tmp_path / "voices", service=service) as server:

        async def one(http: httpx.AsyncClient, text: str) -> httpx.Response:
            body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
            return await http.post("/v1/audio/speech", json=body)

        async def main() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
            async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=120) as http:
                return await asyncio.gather(*(one(http, t) for t in texts))

        responses = asyncio.run(main())
        synth = server.service.synthesizer
    assert len(responses) == 200
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= min(max_queue, 200) // 2
    if max_queue >= len(texts):
        assert statuses.count(200) == len(texts)
    for text, response in zip(texts, responses, strict=True):
        if response.status_code == 429:
            assert int(response.headers["retry-after"]) >= 1
            continue
        expected = synth.synthesize(text, voice="anna").audio
        assert len(response.content) == 2 * len(expected), text
        assert np.frombuffer(response.content, "<i2").any()


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed (apt-get install -y redis-server)")
def test_clones_are_shared_through_redis(tiny_model: Path, tmp_path: Path) -> None:
    redis = RedisProcess(tmp_path)
    try:
        with (
            LiveServer(tiny_model, tmp_path / "a", redis_url=redis.url) as a,
            LiveServer(tiny_model, tmp_path / "b", redis_url=redis.url) as b,
        ):
            files = {"audio_sample": ("clip.wav", (DATA / "speech_en_male_16k.wav").read_bytes(), "audio/wav")}
            voice = httpx.post(f"{a.url}/v1/audio/voices", data={"name": "Shared"}, files=files, timeout=60).json()
            body = {"model": "tts-1", "voice": voice["id"], "input": "Hello.", "response_format": "pcm"}
            assert httpx.post(f"{b.url}/v1/audio/speech", json=body, timeout=60).status_code == 200
            assert voice["id"] in {v["id"] for v in httpx.get(f"{b.url}/v1/audio/voices").json()["data"]}
            assert (tmp_path / "b" / f"{voice['id']}.voice.json").is_file()  # adopted durably on b
            assert httpx.post(f"{a.url}/v1/audio/speech", json=body, timeout=60).status_code == 200
            assert httpx.delete(f"{b.url}/v1/audio/voices/{voice['id']}").status_code == 200
            # a, which made the clone and holds its file, drops it too: at once for its voice list, and for
            # speech once its background read of the deletes has run (the request that starts it is served)
            assert voice["id"] not in {v["id"] for v in httpx.get(f"{a.url}/v1/audio/voices").json()["data"]}
            assert not (tmp_path / "a" / f"{voice['id']}.voice.json").exists()
            gone = httpx.post(f"{a.url}/v1/audio/speech", json=body, timeout=60)
            assert gone.status_code == 400 and "unknown voice" in gone.json()["error"]["message"]
            assert httpx.delete(f"{a.url}/v1/audio/voices/{voice['id']}").status_code == 404
            # a clone a holds and only speaks with (no list) also goes within the sync interval
            again = httpx.post(f"{a.url}/v1/audio/voices", data={"name": "Again"}, files=files, timeout=60).json()
            speak = {**body, "voice": again["id"]}
            assert httpx.post(f"{b.url}/v1/audio/speech", json=speak, timeout=60).status_code == 200
            assert httpx.delete(f"{b.url}/v1/audio/voices/{again['id']}").status_code == 200
            statuses = []
            for _ in range(20):
                statuses.append(httpx.post(f"{a.url}/v1/audio/speech", json=speak, timeout=60).status_code)
                if statuses[-1] == 400:
                    break
                time.sleep(0.2)
            assert statuses[-1] == 400, statuses
    finally:
        redis.stop()


def test_a_stream_cut_after_its_first_bytes_is_incomplete_and_logged_once(
    tiny_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A deadline that passes mid-stream: the client gets the first chunk, then a connection dropped before the
    chunked body's end (never a short body that looks whole); the server logs one warning, no traceback, and
    the next request on a new connection is served."""
    import logging

    from rtvox.runtime.sched_types import DeadlineExceededError
    from rtvox.runtime.types import AudioChunk, SynthesisRequest
    from rtvox.server import create_app

    class CutService(ScriptedService):
        calls = 0

        async def stream(self, request: SynthesisRequest, *, deadline_s: float | None = None):  # type: ignore[no-untyped-def]
            self.calls += 1
            audio = np.full(2400, 0.25, np.float32)
            yield AudioChunk(0, audio, "first", self.calls > 1)
            if self.calls == 1:
                raise DeadlineExceededError(0.5)

    body = {"model": "tts-1", "voice": "alloy", "input": "Hello.", "response_format": "pcm"}
    caplog.set_level(logging.WARNING)
    with LiveServer.around(create_app(CutService(tiny_model, tmp_path))) as server:  # type: ignore[arg-type]
        received = b""
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body) as r,
        ):
            assert r.status_code == 200
            for piece in r.iter_raw():
                received += piece
        assert received == np.full(2400, round(0.25 * 32767), "<i2").tobytes()  # the first chunk, then the cut
        whole = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
        assert whole.status_code == 200 and len(whole.content) == 2 * 2400
    cut = [r for r in caplog.records if "stream was cut" in r.getMessage()]
    assert len(cut) == 1 and cut[0].levelno == logging.WARNING and "deadline" in cut[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_a_very_long_word_is_spoken_not_a_500(client: openai.OpenAI) -> None:
    """A word longer than any chunk (a URL, a DNA string, run-together identifiers) is read in pieces: 200, all
    of it spoken, and the connection stays usable (a 500 before, with the keep-alive connection dropped)."""
    short = client.audio.speech.create(model="tts-1", voice="alloy", input="ACGT" * 60, response_format="pcm")
    long = client.audio.speech.create(model="tts-1", voice="alloy", input="ACGT" * 150, response_format="pcm")
    assert len(long.content) > 2 * len(short.content) > 0  # the end is not dropped
    again = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello.", response_format="wav")
    assert decode_audio(again.content)[0].size > 0


def test_openai_client_custom_voice_flow(client: openai.OpenAI) -> None:
    """OpenAI's documented order, through the official client: a consent recording, then the voice naming it."""
    clip = (DATA / "speech_en_female_16k.wav").read_bytes()
    consent = client.audio.voice_consents.create(name="Ann", language="en-US", recording=("c.wav", clip, "audio/wav"))
    assert consent.id.startswith("cons_") and consent.language == "en-US"
    assert client.audio.voice_consents.retrieve(consent.id).name == "Ann"
    assert client.audio.voice_consents.update(consent.id, name="Ann B").name == "Ann B"
    assert consent.id in [c.id for c in client.audio.voice_consents.list(limit=100)]
    voice = client.audio.voices.create(name="Ann B", audio_sample=("s.wav", clip, "audio/wav"), consent=consent.id)
    speech = client.audio.speech.create(model="tts-1", voice=voice.id, input="Hello.", response_format="wav")
    assert len(decode_audio(speech.content)[0]) > 0
    assert client.audio.voice_consents.delete(consent.id).deleted
