"""Load benchmark plumbing (not its speed): texts, stall detection, a JSON-able result from a tiny run."""

from __future__ import annotations

import json
import math

import pytest

from rtvox.runtime import Synthesizer
from rtvox.runtime.loadbench import (
    TEXT_MAX_CHARS,
    _device_use,
    level_result,
    make_texts,
    run_load_bench,
    stream_record,
)


def test_texts_are_deterministic_mixed_and_bounded() -> None:
    texts = make_texts(40, seed=3)
    assert texts == make_texts(40, seed=3) and texts != make_texts(40, seed=4)
    assert all(0 < len(t.text) <= TEXT_MAX_CHARS + 80 and t.seconds > 0 for t in texts)
    assert any("，" in t.text for t in texts) and any(t.text.isascii() for t in texts)


def test_stall_means_a_chunk_arrived_after_the_audio_before_it_ran_out() -> None:
    assert not stream_record(0.0, [0.0, 0.5, 1.5], [1.0, 1.0, 1.0]).stalled  # chunk 1 needed at 1.0, chunk 2 at 2.0
    assert stream_record(0.0, [0.0, 1.2, 1.5], [1.0, 1.0, 1.0]).stalled  # chunk 1 came 0.2 s late
    assert not stream_record(0.0, [0.3], [2.0]).stalled


def test_a_stalled_stream_keeps_its_timeline_and_the_level_reports_it() -> None:
    ok = stream_record(10.0, [10.1, 10.6, 11.6], [1.0, 1.0, 1.0])
    assert not ok.stalled and ok.timeline is None
    late = stream_record(10.0, [10.1, 11.3, 11.6], [1.0, 1.0, 1.0])  # chunk 1 needed at 11.1, came at 11.3
    assert late.stalled and late.timeline is not None
    assert [a for a, _, _ in late.timeline] == pytest.approx([0.1, 1.3, 1.6])
    assert [d for _, _, d in late.timeline] == pytest.approx([0.0, 200.0, -500.0])
    level = level_result(2, [ok, late], 0, 2.0, 0.5)
    assert level.stalled_streams == 1 and not level.passed and level.stalls == [late.timeline]


def test_tiny_run_gives_a_json_able_result(rsynth: Synthesizer) -> None:
    result = run_load_bench(
        synthesizer=rsynth, levels=(1, 2), level_duration_s=0.5, think_time_s=0.05, baseline_requests=2
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 2]
    for level in data["levels"]:
        assert level["streams"] >= 1 and level["errors"] == 0 and level["audio_s_per_s"] > 0
        assert sum(level["batch_size_histogram"].values()) >= level["streams"]
    assert data["baseline"]["requests"] == 2 and data["baseline"]["audio_s_per_s"] > 0
    assert data["max_realtime_streams"] in (0, 1, 2) and data["machine"]["device"] == "cpu"
    assert all(math.isnan(level.device_busy) for level in result.levels)  # no captured pipeline on a CPU


def test_device_use_is_the_spans_share_of_wall_time_and_their_means() -> None:
    before = {"steps": 10, "encode_s": 1.0, "decode_s": 2.0, "host_d2h_s": 0.5}
    after = {"steps": 30, "encode_s": 1.2, "decode_s": 2.6, "host_d2h_s": 0.6, "host_prep_s": 0.04}
    use = _device_use(before, after, wall=2.0)
    assert use["host_ms_per_step"] == {"d2h": pytest.approx(5.0), "prep": pytest.approx(2.0)}
    assert use["device_busy"] == pytest.approx(0.4)  # (0.2 + 0.6) s of 2 s
    assert use["device_encode_ms_mean"] == pytest.approx(10.0) and use["device_decode_ms_mean"] == pytest.approx(30.0)
    assert _device_use(None, after, 2.0) == {} and _device_use(before, None, 2.0) == {}


def test_saturation_phase_and_frontend_processes(rsynth: Synthesizer) -> None:
    """The closed-loop phase runs after the levels and enters the throughput ratio; the frontend in a worker
    process gives the same streams (no errors)."""
    from rtvox.runtime.service import ServiceConfig

    config = ServiceConfig(
        fallback_device=None, default_deadline_s=None, frontend_processes=1, bucket_edges=(16, 48, 200)
    )
    result = run_load_bench(
        synthesizer=rsynth,
        levels=(1,),
        level_duration_s=0.5,
        think_time_s=0.05,
        baseline_requests=2,
        saturation_clients=3,
        config=config,
    )
    data = json.loads(json.dumps(result.to_dict()))
    sat = data["saturation"]
    assert sat["concurrency"] == 3 and sat["errors"] == 0 and sat["streams"] >= 3
    assert data["settings"]["frontend_processes"] == 1 and data["settings"]["saturation_clients"] == 3
    assert data["settings"]["bucket_edges"] == [16, 48, 200]
    best = max(sat["audio_s_per_s"], data["levels"][0]["audio_s_per_s"])
    assert abs(data["throughput_vs_baseline"] - best / data["baseline"]["audio_s_per_s"]) < 1e-9


def test_service_processes_share_the_clients_and_merge(rsynth: Synthesizer) -> None:
    """With two service processes each serves its share of a level's clients on engines of its own (the model
    loaded there from its directory); the level's figures are over both, and each process's own are kept."""
    from rtvox.runtime.service import ServiceConfig

    config = ServiceConfig(fallback_device=None, default_deadline_s=None)
    result = run_load_bench(
        synthesizer=rsynth,
        levels=(3,),
        level_duration_s=0.6,
        think_time_s=0.05,
        baseline_requests=2,
        saturation_clients=4,
        config=config,
        service_processes=2,
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["settings"]["service_processes"] == 2
    for level in (data["levels"][0], data["saturation"]):
        parts = level["processes"]
        assert [p["clients"] for p in parts] == ([2, 1] if level["concurrency"] == 3 else [2, 2])
        assert all(p["streams"] >= 1 and p["errors"] == 0 for p in parts)
        assert level["streams"] == sum(p["streams"] for p in parts) and level["errors"] == 0
        assert level["audio_s_per_s"] > 0
    with pytest.raises(ValueError, match="service_processes"):
        run_load_bench(synthesizer=rsynth, levels=(1,), service_processes=0)
