"""The served OpenAPI schema, fuzzed with schemathesis against the real service: no input gets a 5xx.

The operations are walked inside one test (schemathesis' lazy pytest loader does not run under pytest 9), each
with its own hypothesis run; failures are collected so one run reports every operation that broke.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode

from .server_harness import LiveServer

# Enough cases per operation to hit every field's edges; bounded so the suite stays within CI's time.
EXAMPLES_PER_OPERATION = 30


@pytest.fixture(scope="module")
def fuzz_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("fuzz-voices")) as server:
        yield server


def test_schema_is_served(fuzz_server: LiveServer) -> None:
    schema = requests.get(f"{fuzz_server.url}/openapi.json", timeout=10).json()
    assert {"/v1/audio/speech", "/v1/tts", "/v1/audio/voices", "/v1/audio/voices/{voice_id}"} <= set(schema["paths"])


def test_no_server_errors(fuzz_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    failures: list[str] = []
    operations = 0
    session = requests.Session()
    # Positive cases fit the schema (they must succeed or fail politely); negative ones break it on purpose.
    for result, mode in itertools.product(schema.get_all_operations(), GenerationMode):
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: schemathesis.Case) -> None:
            response = case.call(session=session, timeout=60)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.path} → {response.status_code}: {response.text[:300]}")
                return
            if response.status_code >= 400:
                body = response.json()
                if set(body.get("error", {})) != {"message", "type", "param", "code"}:
                    failures.append(f"{case.method} {case.path} → {response.status_code} without an OpenAI error")

        try:
            check()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE, f"no valid case for {operation.label}"  # nothing to break
    assert operations >= 2 * 8
    assert not failures, "\n".join(failures[:20])
