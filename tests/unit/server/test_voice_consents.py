"""OpenAI's custom-voice flow: consent recordings (create, read, rename, page, delete), then a clone naming one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from rtvox.runtime import Synthesizer

from .conftest import FakeService, make_client
from .test_speech_api import assert_openai_error

DATA = Path(__file__).resolve().parents[2] / "data"
CLIP = (DATA / "speech_en_male_16k.wav").read_bytes()


def consent(client: TestClient, name: str = "Ben", language: str = "en-US", clip: bytes = CLIP) -> Any:
    files = {"recording": ("consent.wav", clip, "audio/wav")}
    return client.post("/v1/audio/voice_consents", data={"name": name, "language": language}, files=files)


def test_consent_life_cycle_and_a_clone_that_names_it(fake_service: FakeService, tiny_model: Path) -> None:
    with make_client(fake_service) as client:
        made = consent(client)
        assert made.status_code == 200, made.text
        record = made.json()
        assert record["object"] == "audio.voice_consent" and record["id"].startswith("cons_")
        assert record["name"] == "Ben" and record["language"] == "en-US" and record["created_at"] > 0
        assert client.get(f"/v1/audio/voice_consents/{record['id']}").json() == record
        renamed = client.post(f"/v1/audio/voice_consents/{record['id']}", json={"name": "Ben Smith"}).json()
        assert renamed == {**record, "name": "Ben Smith"}
        files = {"audio_sample": ("clip.wav", CLIP, "audio/wav")}
        voice = client.post("/v1/audio/voices", data={"name": "Ben Smith", "consent": record["id"]}, files=files)
        assert voice.status_code == 200, voice.text
        unknown = client.post("/v1/audio/voices", data={"name": "Bee", "consent": "cons_" + "0" * 16}, files=files)
        assert_openai_error(unknown, 400, "consent")
        other = client.post("/v1/audio/voices", data={"name": "Bee", "consent": "signed on paper"}, files=files)
        assert other.status_code == 200  # not one of ours: accepted as given, as before

    restarted = FakeService(Synthesizer(tiny_model, device="cpu"))  # same clones folder: the consent is kept
    with make_client(restarted) as client:
        assert client.get(f"/v1/audio/voice_consents/{record['id']}").json()["name"] == "Ben Smith"
        gone = client.delete(f"/v1/audio/voice_consents/{record['id']}")
        assert gone.json() == {"id": record["id"], "object": "audio.voice_consent", "deleted": True}
        assert_openai_error(client.get(f"/v1/audio/voice_consents/{record['id']}"), 404, "consent_id")
        assert_openai_error(client.delete(f"/v1/audio/voice_consents/{record['id']}"), 404, "consent_id")


def test_consents_page_in_creation_order(client: TestClient) -> None:
    ids = [consent(client, name=f"c{i}").json()["id"] for i in range(5)]
    first = client.get("/v1/audio/voice_consents", params={"limit": 2}).json()
    listed = [c["id"] for c in first["data"]]
    assert first["object"] == "list" and first["has_more"] and len(listed) == 2
    seen = listed
    while first["has_more"]:
        first = client.get("/v1/audio/voice_consents", params={"limit": 2, "after": first["last_id"]}).json()
        seen += [c["id"] for c in first["data"]]
    assert [i for i in seen if i in ids] == sorted(ids, key=seen.index) and set(ids) <= set(seen)
    assert len(seen) == len(set(seen))  # no consent twice across pages
    assert_openai_error(client.get("/v1/audio/voice_consents", params={"after": "cons_" + "f" * 16}), 400, "after")


def test_bad_consent_uploads_are_4xx_naming_the_field(client: TestClient) -> None:
    assert_openai_error(consent(client, language="english please"), 400, "language")
    assert_openai_error(consent(client, clip=b"not audio at all"), 400, "recording")
    assert_openai_error(consent(client, name="   "), 400, "name")
    files = {"recording": ("x.txt", CLIP, "text/plain")}
    response = client.post("/v1/audio/voice_consents", data={"name": "a", "language": "en"}, files=files)
    assert_openai_error(response, 415, "recording")
    assert_openai_error(client.get("/v1/audio/voice_consents/..%2Fetc"), 404)
    assert_openai_error(client.post("/v1/audio/voice_consents/cons_zz", json={"name": "x"}), 400)
