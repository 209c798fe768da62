"""API keys, body limits, CORS, health/ready/metrics and the static page."""

from __future__ import annotations

from fastapi.testclient import TestClient

from .conftest import FakeService, make_client
from .test_speech_api import assert_openai_error, speech


def test_api_keys(fake_service: FakeService) -> None:
    with make_client(fake_service, api_keys=("k1", "k2")) as client:
        missing = speech(client)
        assert assert_openai_error(missing, 401)["type"] == "authentication_error"
        assert missing.headers["www-authenticate"] == "Bearer"  # type: ignore[attr-defined]
        bad = client.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": "hi", "voice": "alloy"},
            headers={"Authorization": "Bearer nope"},
        )
        assert_openai_error(bad, 401)
        for key in ("k1", "k2"):
            good = client.post(
                "/v1/audio/speech",
                json={"model": "tts-1", "input": "hi", "voice": "alloy", "response_format": "pcm"},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert good.status_code == 200
        assert_openai_error(client.get("/v1/audio/voices"), 401)
        assert_openai_error(client.get("/v1/models"), 401)
        # Operator and page routes stay open: probes and the page itself carry no key.
        for path in ("/health", "/ready", "/metrics", "/", "/static/app.js"):
            assert client.get(path).status_code == 200, path


def test_body_limit_by_header_and_by_stream(fake_service: FakeService) -> None:
    with make_client(fake_service, max_upload_bytes=2048) as client:
        limit = client.app.state.rtvox.config.max_body_bytes  # type: ignore[attr-defined]
        big = b'{"text": "' + b"a" * (limit + 10) + b'"}'
        assert_openai_error(client.post("/v1/tts", content=big, headers={"content-type": "application/json"}), 413)

        def chunks() -> object:
            yield big[: len(big) // 2]
            yield big[len(big) // 2 :]

        streamed = client.post("/v1/tts", content=chunks(), headers={"content-type": "application/json"})
        assert_openai_error(streamed, 413)
        client.post("/nowhere", content=big, headers={"content-type": "application/json"})
        metrics = client.get("/metrics").text  # refused before routing, yet counted under their routes
        assert 'rtvox_http_requests_total{method="POST",route="/v1/tts",status="413"} 2.0' in metrics
        assert 'route="unmatched",status="413"} 1.0' in metrics


def test_cors(fake_service: FakeService) -> None:
    with make_client(fake_service, cors_origins=("https://app.example",)) as client:
        preflight = client.options(
            "/v1/audio/speech",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        other = client.get("/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    with make_client(fake_service) as client:
        assert "access-control-allow-origin" not in client.get("/health", headers={"Origin": "https://a.b"}).headers


def test_health_ready_metrics(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/ready").json()["ready"] is True
    assert client.head("/health").status_code == client.head("/ready").status_code == 200  # probes that use HEAD
    for path in ("/", "/docs", "/v1/models", "/v1/audio/voices", "/openapi.json"):  # HEAD wherever GET works
        got, head = client.get(path), client.head(path)
        assert head.status_code == 200 and not head.content, path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == str(len(got.content)), path
    missing = client.head("/v1/nothing")
    assert missing.status_code == 404 and not missing.content
    assert 'rtvox_http_requests_total{method="HEAD",route="/health",status="200"}' in client.get("/metrics").text
    speech(client)
    speech(client, voice="nobody")
    text = client.get("/metrics").text
    assert 'rtvox_http_requests_total{method="POST",route="/v1/audio/speech",status="200"} 1.0' in text
    assert 'rtvox_http_requests_total{method="POST",route="/v1/audio/speech",status="400"} 1.0' in text
    for odd in ("FOO123", "BAR456"):  # methods a client makes up share one label: the series stay bounded
        assert client.request(odd, "/health").status_code == 405
    text = client.get("/metrics").text
    assert "FOO123" not in text and 'method="other",route="/health",status="405"} 2.0' in text
    for name in (
        "rtvox_time_to_first_audio_seconds_bucket",
        "rtvox_synthesis_duration_seconds_bucket",
        "rtvox_queue_depth",
        "rtvox_batch_size_bucket",
        "rtvox_embedding_cache_hit_ratio",
        'rtvox_device_memory_bytes{device="cpu",kind="rss"}',
    ):
        assert name in text, name


def test_not_ready_before_start(fake_service: FakeService) -> None:
    client = make_client(fake_service)  # no `with`: the lifespan has not run, the service is not started
    response = client.get("/ready")
    assert_openai_error(response, 503)
    assert response.headers["retry-after"] == "1"
    head = client.head("/ready")
    assert head.status_code == 503 and head.headers["retry-after"] == "1" and not head.content


def test_page_and_schema(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "<canvas" in page.text and "/static/app.js" in page.text
    assert 'src="http' not in page.text and 'href="http' not in page.text  # no CDN: everything is served here
    schema = client.get("/openapi.json").json()
    assert {"/v1/audio/speech", "/v1/tts", "/v1/audio/voices", "/v1/models"} <= set(schema["paths"])
    ids = [op["operationId"] for path in schema["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))  # unique operation ids (FastAPI warns on duplicates)


def test_malformed_bodies_are_4xx(client: TestClient) -> None:
    json_type = {"content-type": "application/json"}
    multipart = {"content-type": "multipart/form-data; boundary=zz"}
    for path, body, headers in (
        ("/v1/audio/speech", b'\xff\xfe{"a":1}', json_type),
        ("/v1/audio/speech", b'{"model":"tts-1","input":"hi","voice":"alloy","speed":NaN}', json_type),
        ("/v1/audio/speech", b'{"model":"tts-1","input":"\\ud800","voice":"alloy"}', json_type),
        ("/v1/audio/speech", b"", json_type),
        ("/v1/tts", b'{"text":"hi","seed":1e30}', json_type),
        ("/v1/audio/voices", b"garbage", multipart),
        ("/v1/audio/voices", b"garbage", {"content-type": "multipart/form-data"}),
    ):
        response = client.post(path, content=body, headers=headers)
        assert 400 <= response.status_code < 500, (path, body, response.status_code)
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_static_files_cannot_escape(client: TestClient) -> None:
    for path in ("/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fetc%2fpasswd"):
        response = client.get(path)
        assert response.status_code == 404
        assert "root:" not in response.text
