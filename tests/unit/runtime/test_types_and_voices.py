"""Request validation, voice store persistence and frame allocation — no model needed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rtvox.constants import MAX_DURATION_SQUEEZE, MAX_INPUT_CHARS, SPEAKER_EMBED_DIM
from rtvox.errors import InputError, TextError, VoiceNotFoundError
from rtvox.runtime.synthesizer import Synthesizer, allocate_frames
from rtvox.runtime.types import SynthesisRequest, Voice
from rtvox.runtime.voices import VoiceStore, validate_voice_name


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(SPEAKER_EMBED_DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("speed", 0.1, "speed must be a number from 0.5 to 2.0"),
        ("speed", float("nan"), "speed"),
        ("emotion_alpha", -1.0, "emotion_alpha"),
        ("duration", 0.0, "duration"),
        ("duration", 1e9, "duration"),
        ("emotion", "bored", "unknown emotion 'bored'; use one of: neutral, happy"),
        ("pitch_scale", "high", "pitch_scale"),
        ("speed", True, "speed"),  # a bool is not a rate
        ("duration", True, "duration"),
        ("voice", 5, "voice must be a voice name"),
        ("speaker_embedding", np.zeros(10), "speaker_embedding must be 256 finite numbers"),
        ("speaker_embedding", np.full(256, np.nan), "speaker_embedding"),
        ("speaker_embedding", np.full(256, np.inf), "speaker_embedding"),
        ("speaker_embedding", np.zeros(256), "not all zero"),
        ("speaker_embedding", "abc", "speaker_embedding"),
    ],
)
def test_request_rejects_bad_settings(field: str, value: object, needle: str) -> None:
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(".", r"\.")) as info:
        SynthesisRequest(text="hi", **{field: value})  # type: ignore[arg-type]
    assert info.value.param == field


def test_request_takes_numpy_numbers_and_scales_embeddings_to_unit_norm() -> None:
    request = SynthesisRequest(
        text="hi", speed=np.float32(1.25), duration=np.int64(3), speaker_embedding=np.ones((1, 256))
    )
    assert request.speed == 1.25 and type(request.speed) is float and request.duration == 3.0
    assert request.speaker_embedding is not None and request.speaker_embedding.shape == (256,)
    assert abs(float(np.linalg.norm(request.speaker_embedding)) - 1.0) < 1e-6
    unit = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    unit /= np.linalg.norm(unit)
    kept = SynthesisRequest(text="hi", speaker_embedding=unit).speaker_embedding
    assert kept is not None and kept.tobytes() == unit.tobytes()  # an encoder's output stays bit for bit


def test_request_rejects_text_over_limit_and_names_it() -> None:
    with pytest.raises(TextError, match=f"over the limit of {MAX_INPUT_CHARS}") as info:
        SynthesisRequest(text="a" * (MAX_INPUT_CHARS + 1))
    assert info.value.param == "input"
    SynthesisRequest(text="a" * MAX_INPUT_CHARS)  # exactly at the limit is fine


def test_voice_rejects_wrong_embedding() -> None:
    with pytest.raises(InputError, match="bad embedding"):
        Voice(name="x", embedding=np.zeros(3, np.float32))
    with pytest.raises(InputError, match="bad embedding"):
        Voice(name="x", embedding=np.full(SPEAKER_EMBED_DIM, np.nan, np.float32))


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "", ".hidden", "x" * 65, "名字", "a b", "a\x00b"])
def test_voice_names_cannot_reach_the_filesystem(name: str) -> None:
    with pytest.raises(InputError, match="invalid voice name"):
        validate_voice_name(name)


def test_voice_store_persists_clones_atomically(tmp_path: Path) -> None:
    builtin = Voice(name="anna", embedding=_unit(0))
    store = VoiceStore([builtin], clones_dir=tmp_path)
    store.add(Voice(name="bob-1", embedding=_unit(1), gender="male", builtin=False))
    assert [p.name for p in tmp_path.iterdir()] == ["bob-1.voice.json"]

    reopened = VoiceStore([builtin], clones_dir=str(tmp_path))  # a plain string path, as Python callers pass one
    bob = reopened.get("bob-1")
    assert not bob.builtin and bob.gender == "male"
    np.testing.assert_allclose(bob.embedding, _unit(1), rtol=1e-6)
    assert [v.name for v in reopened.list()] == ["anna", "bob-1"]

    with pytest.raises(InputError, match="built-in"):
        reopened.add(Voice(name="anna", embedding=_unit(2)))
    with pytest.raises(InputError, match="cannot be removed"):
        reopened.remove("anna")
    reopened.remove("bob-1")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(VoiceNotFoundError, match="known voices: anna"):
        reopened.get("bob-1")


def test_voice_store_skips_corrupt_files_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "bad.voice.json").write_text("{not json")
    (tmp_path / "short.voice.json").write_text(json.dumps({"name": "short", "embedding": [1.0, 2.0]}))
    with pytest.warns(UserWarning, match="skipping unreadable voice file"):
        store = VoiceStore([], clones_dir=tmp_path)
    assert store.list() == []


@pytest.mark.parametrize(
    ("natural", "total"),
    [([10, 20, 30], 120), ([10, 20, 30], 31), ([1], 7), ([5, 5, 5], 16), ([0, 0], 9), ([3, 97], 50)],
)
def test_allocate_frames_is_exact_and_proportional(natural: list[int], total: int) -> None:
    frames = allocate_frames(natural, total)
    assert sum(frames) == total
    if sum(natural) > 0:
        expected = np.asarray(natural) / sum(natural) * total
        assert np.all(np.abs(np.asarray(frames) - expected) < 1.0)


def test_allocate_frames_gives_every_chunk_a_frame_when_it_can() -> None:
    # 0 frames would mean "no target" (a chunk's natural length): the exact total would be missed
    assert allocate_frames([174, 2, 2, 2, 1], 6) == [2, 1, 1, 1, 1]
    assert allocate_frames([500, 1, 1], 3) == [1, 1, 1]


def test_too_short_a_duration_is_refused_by_name(rsynth: Synthesizer) -> None:
    text = "This is a long passage of text. " * 200  # ~40 chunks
    with pytest.raises(InputError, match=r"duration 0.2 s is too short for this text") as info:
        rsynth.prepare(SynthesisRequest(text=text, duration=0.2, max_chars=len(text)))
    assert info.value.param == "duration"
    # a target may squeeze the text's unforced length at most MAX_DURATION_SQUEEZE-fold: under that it is refused,
    # naming both lengths; at it, the frames are exact and every chunk has some
    short = "This is a short one, then another, and a third, and then a fourth one after it."
    natural = sum(sum(c.durations) for c in rsynth.synthesize(short).chunks)
    shortest = math.ceil(natural / MAX_DURATION_SQUEEZE)
    with pytest.raises(InputError, match=rf"unforced it takes {natural / 93.75:.2f} s .* at most 4x") as refused:
        rsynth.prepare(SynthesisRequest(text=short, duration=(shortest - 1) / 93.75))
    assert refused.value.param == "duration"
    prepared = rsynth.prepare(SynthesisRequest(text=short, duration=shortest / 93.75))
    assert len(prepared.chunks) > 1 and min(c.target_frames for c in prepared.chunks) >= 1
    assert sum(c.target_frames for c in prepared.chunks) == shortest


def test_voice_store_finds_a_clone_by_its_upload_label_and_keeps_reserved_names(tmp_path: Path) -> None:
    """The CLI and the server share one folder: a clone uploaded as "a b" (id voice_…) is found and removed by
    that label; two clones of one label are ambiguous (ids listed); an empty name matches no label; no clone
    may take a built-in's or an OpenAI voice's name, in any case."""
    store = VoiceStore([Voice(name="anna", embedding=_unit(0))], clones_dir=tmp_path)
    store.add(Voice(name="voice_a1", embedding=_unit(1), description="a b", builtin=False))
    store.add(Voice(name="cli-made", embedding=_unit(2), builtin=False))  # no label, as `rtvox voices add` makes
    assert store.get("a b").name == "voice_a1"
    for empty in ("", " "):
        with pytest.raises(VoiceNotFoundError):
            store.get(empty)
    store.add(Voice(name="voice_a2", embedding=_unit(3), description="a b", builtin=False))
    with pytest.raises(InputError, match="2 cloned voices are named 'a b' \\(voice_a1, voice_a2\\)"):
        store.get("a b")
    store.remove("voice_a2")
    store.remove("a b")
    assert [v.name for v in store.list()] == ["anna", "cli-made"]
    for taken in ("alloy", "NOVA", "Anna"):
        with pytest.raises(InputError, match="choose another name"):
            store.add(Voice(name=taken, embedding=_unit(4), builtin=False))


def test_a_clone_added_or_removed_by_another_process_is_seen(tmp_path: Path) -> None:
    """Two stores over one folder (the CLI beside a running server, no Redis): each sees the other's changes."""
    server, cli = VoiceStore([], clones_dir=tmp_path), VoiceStore([], clones_dir=tmp_path)
    emb = np.ones(SPEAKER_EMBED_DIM, np.float32) / np.sqrt(SPEAKER_EMBED_DIM)
    cli.add(Voice(name="voice_abc", embedding=emb, description="Zoë", builtin=False))
    assert server.has("voice_abc") and server.get("Zoë").name == "voice_abc"
    assert [v.name for v in server.list()] == ["voice_abc"]
    cli.remove("voice_abc")
    assert not server.has("voice_abc") and server.list() == []
    with pytest.raises(VoiceNotFoundError):
        server.get("voice_abc")
