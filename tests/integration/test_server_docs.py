"""The API reference at /docs: our own page over /openapi.json, served without a CDN, open without an API key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .server_harness import LiveServer

KEY = "docs-test-key"


@pytest.fixture(scope="module")
def keyed(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("docs-voices"), api_keys=(KEY,)) as server:
        yield server


def _assets(html: str) -> list[str]:
    """The src and href of the page's script and link tags."""
    return re.findall(r'<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]*)"', html)


def test_docs_page_is_offline_and_open(keyed: LiveServer) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as http:
        assert http.post("/v1/tts", json={"text": "hi"}).status_code == 401  # keys are on...
        page = http.get("/docs")  # ...and the reference needs none, like the page at /
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assets = _assets(page.text)
        assert "static/docs.js" in assets and "static/style.css" in assets
        for asset in assets:
            assert "://" not in asset and not asset.startswith("//"), asset
            if asset.startswith("data:"):
                continue  # the empty icon: spares a request for /favicon.ico
            served = http.get(page.url.join(asset))
            assert served.status_code == 200, asset
            assert b"cdn" not in served.content.lower() and b"https://" not in served.content, asset
        assert "cdn" not in page.text.lower() and "https://" not in page.text and "http://" not in page.text
        assert http.get("/openapi.json").json()["paths"]["/v1/audio/speech"]["post"]
        assert http.get("/redoc").status_code == 404
        assert http.get("/docs/oauth2-redirect").status_code == 404  # nothing of Swagger UI is left
