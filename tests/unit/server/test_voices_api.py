"""Voice routes: list, clone from an upload, use, delete, persistence, hostile ids and uploads."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rtvox.runtime import Synthesizer
from rtvox.server.voices import OPENAI_VOICES, map_openai_voices

from .conftest import FakeService, make_client
from .test_speech_api import assert_openai_error, speech

DATA = Path(__file__).resolve().parents[2] / "data"
CLIP = (DATA / "speech_en_male_16k.wav").read_bytes()


def upload(client: TestClient, name: str = "Ben's clone", clip: bytes = CLIP, media: str = "audio/wav") -> object:
    return client.post("/v1/audio/voices", data={"name": name}, files={"audio_sample": ("clip.wav", clip, media)})


def test_list_has_builtins_and_aliases(client: TestClient) -> None:
    body = client.get("/v1/audio/voices").json()
    assert {v["id"] for v in body["data"]} == {"anna", "ben"}
    assert all(v["type"] == "builtin" for v in body["data"])
    assert set(body["openai_aliases"]) == {name for name, _ in OPENAI_VOICES}


def test_openai_names_follow_gender(fake_service: FakeService) -> None:
    mapping = map_openai_voices(fake_service.synthesizer.voices.list())
    assert mapping["onyx"] == "ben" and mapping["nova"] == "anna" and mapping["alloy"] in ("anna", "ben")


def test_clone_use_delete_and_survive_restart(fake_service: FakeService, tiny_model: Path) -> None:
    with make_client(fake_service) as client:
        created = upload(client)
        assert created.status_code == 200, created.text
        voice = created.json()
        assert voice["object"] == "audio.voice" and voice["type"] == "audio_sample" and voice["name"] == "Ben's clone"
        assert voice["id"].startswith("voice_")
        assert voice["id"] in {v["id"] for v in client.get("/v1/audio/voices").json()["data"]}
        assert speech(client, voice={"id": voice["id"]}).status_code == 200
        assert fake_service.requests[-1].voice == voice["id"]

    # A new process (new Synthesizer, same voices dir) still has the clone.
    restarted = FakeService(Synthesizer(tiny_model, device="cpu"))
    with make_client(restarted) as client:
        assert speech(client, voice=voice["id"]).status_code == 200
        deleted = client.delete(f"/v1/audio/voices/{voice['id']}")
        assert deleted.json() == {"id": voice["id"], "object": "audio.voice.deleted", "deleted": True}
        assert_openai_error(client.delete(f"/v1/audio/voices/{voice['id']}"), 404)
        assert_openai_error(speech(client, voice=voice["id"]), 400, "voice")


@pytest.mark.parametrize("voice_id", ["..%2F..%2Fetc%2Fpasswd", "a.b", "%2E%2E", "x" * 65, "-leading"])
def test_hostile_ids_never_reach_the_filesystem(client: TestClient, voice_id: str) -> None:
    response = client.delete(f"/v1/audio/voices/{voice_id}")
    assert response.status_code in (400, 404)
    assert "error" in response.json()


def test_builtin_cannot_be_deleted(client: TestClient) -> None:
    assert_openai_error(client.delete("/v1/audio/voices/anna"), 400)


def test_bad_uploads(client: TestClient) -> None:
    error = assert_openai_error(upload(client, clip=b"not audio at all" * 100), 400, "audio_sample")
    assert "reference_audio" not in str(error["message"])  # the message names the field the clip came in
    assert_openai_error(upload(client, clip=CLIP[: 44 + 16000]), 400, "audio_sample")  # 0.5 s
    assert_openai_error(upload(client, media="text/plain"), 415, "audio_sample")
    assert assert_openai_error(upload(client, name="   "), 400, "name")["code"] == "invalid_value"
    assert assert_openai_error(upload(client, clip=b""), 400, "audio_sample")["code"] == "invalid_audio"
    missing = client.post("/v1/audio/voices", data={"name": "x"}, files={"other": ("a.wav", CLIP, "audio/wav")})
    assert_openai_error(missing, 400, "audio_sample")
    assert_openai_error(client.post("/v1/audio/voices", json={"name": "x"}), 415)


def test_upload_size_limit(fake_service: FakeService) -> None:
    with make_client(fake_service, max_upload_bytes=64 * 1024) as client:
        assert assert_openai_error(upload(client, clip=CLIP), 413, "audio_sample")["code"] == "request_too_large"


def test_a_clone_answers_to_its_unique_upload_name(client: TestClient, fake_service: FakeService) -> None:
    first = upload(client, name="narrator_b").json()
    assert speech(client, voice="narrator_b").status_code == 200
    assert fake_service.requests[-1].voice == first["id"]
    second = upload(client, name="narrator_b").json()
    error = assert_openai_error(speech(client, voice="narrator_b"), 400, "voice")
    assert first["id"] in error["message"] and second["id"] in error["message"]
    assert speech(client, voice=second["id"]).status_code == 200  # ids always work
    assert fake_service.requests[-1].voice == second["id"]
    assert_openai_error(speech(client, voice="narrator_c"), 400, "voice")


@pytest.mark.parametrize("label", ["日本語の声", "Ben's clone", "-lead", "a/b", "n" * 100])
def test_any_upload_name_is_usable_as_the_voice(client: TestClient, fake_service: FakeService, label: str) -> None:
    """A name needs no id form to be used: labels are matched in memory, never as a path (an unknown name that
    is not of the id form is still refused as before)."""
    made = upload(client, name=label).json()
    assert speech(client, voice=label).status_code == 200
    assert fake_service.requests[-1].voice == made["id"]
    assert_openai_error(speech(client, voice=label + "x"), 400, "voice")


@pytest.mark.parametrize("label", ["anna", "Alloy", "NOVA"])
def test_an_upload_cannot_take_a_builtin_or_openai_name(client: TestClient, label: str) -> None:
    error = assert_openai_error(upload(client, name=label), 400, "name")
    assert "choose another name" in error["message"]
    assert all(v["name"] != label for v in client.get("/v1/audio/voices").json()["data"] if v["type"] != "builtin")


def test_clones_of_a_matching_model_carry_their_timbre(tiny_model: Path, tmp_path: Path) -> None:
    """With `timbre_match` set, an upload stores the clip's spectrum, the model's calibration renders go through
    the service's queue (never onto the engines beside it), and every request for the clone — by id, or a speaker
    reference clip on /v1/tts — carries the clone's timbre; built-in voices carry none."""
    import base64
    import dataclasses
    import shutil

    import numpy as np

    from rtvox.runtime.timbre import CALIBRATION
    from rtvox.training.prosody_prior import update_config

    from .test_speech_api import tts

    model = tmp_path / "matching"
    shutil.copytree(tiny_model, model)
    update_config(model, lambda c: dataclasses.replace(c, timbre_match=0.5))
    service = FakeService(Synthesizer(model, device="cpu"))
    with make_client(service) as client:
        created = upload(client)
        assert created.status_code == 200, created.text
        voice_id = created.json()["id"]
        assert [r.text for r in service.requests] == list(CALIBRATION)  # measured at upload, through the service
        assert all(r.speaker_timbre is None for r in service.requests)
        stored = service.synthesizer.voices.get(voice_id)
        assert stored.spectrum is not None
        assert speech(client, voice=voice_id).status_code == 200
        timbre = service.requests[-1].speaker_timbre
        assert timbre is not None and timbre.shape == (80,) and np.any(timbre)
        assert len(service.requests) == len(CALIBRATION) + 1  # remembered: not measured again
        assert speech(client, voice="anna").status_code == 200
        assert service.requests[-1].speaker_timbre is None
        clip = base64.b64encode(CLIP).decode()
        assert tts(client, speaker_reference=clip, response_format="pcm").status_code == 200
        sent = service.requests[-1]
        assert sent.voice is None and sent.speaker_timbre is not None
        np.testing.assert_allclose(sent.speaker_timbre, timbre, atol=1e-6)  # the same clip as the upload
