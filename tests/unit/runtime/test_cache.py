"""Embedding cache without Redis: LRU order and bounds, serialization, thread safety, compute-once."""

from __future__ import annotations

import threading
import time
from functools import partial

import numpy as np
import pytest

from rtvox.runtime.cache import EmbeddingCache, LRUCache, content_key, decode_embedding, encode_embedding

NS = "speaker:ge2e-v1"


def _vec(seed: int, dim: int = 256) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


@pytest.fixture(autouse=True)
def _no_redis_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTVOX_REDIS_URL", raising=False)


def test_content_key_is_sha256_of_the_bytes() -> None:
    assert content_key(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert content_key(b"abc") != content_key(b"abd")


def test_lru_evicts_least_recently_used_and_keeps_capacity() -> None:
    lru = LRUCache(capacity=3)
    for i in range(3):
        lru.put(NS, f"k{i}", _vec(i))
    assert lru.get(NS, "k0") is not None  # k0 becomes most recent; k1 is now the oldest
    lru.put(NS, "k3", _vec(3))
    assert len(lru) == 3
    assert lru.keys() == [(NS, "k2"), (NS, "k0"), (NS, "k3")]
    assert lru.get(NS, "k1") is None
    lru.put(NS, "k2", _vec(22))  # overwriting refreshes recency without growing
    assert lru.keys() == [(NS, "k0"), (NS, "k3"), (NS, "k2")]
    np.testing.assert_array_equal(lru.get(NS, "k2"), _vec(22))


def test_lru_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        LRUCache(capacity=0)


def test_entries_are_isolated_from_callers() -> None:
    cache = EmbeddingCache(capacity=4)
    v = _vec(0)
    cache.put(NS, "k", v)
    v[:] = 0
    got = cache.get(NS, "k")
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got, _vec(0))
    got[:] = 0
    np.testing.assert_array_equal(cache.get(NS, "k"), _vec(0))


def test_namespaces_never_share_entries() -> None:
    cache = EmbeddingCache(capacity=4)
    key = content_key(b"clip")
    cache.put("speaker:ge2e-v1", key, _vec(1))
    assert cache.get("emotion:abc123", key) is None
    assert cache.stats()["local"] == {"hits": 0, "misses": 1}


@pytest.mark.parametrize(("namespace", "key"), [("", "k"), (NS, ""), (NS, "a:b"), ("speaker x", "k")])
def test_bad_entry_names_say_what_to_do(namespace: str, key: str) -> None:
    with pytest.raises(ValueError, match="content_key"):
        EmbeddingCache().get(namespace, key)


def test_serialization_round_trip_and_corruption() -> None:
    v = _vec(5, 192).reshape(1, 192)
    blob = encode_embedding(v)
    out = decode_embedding(blob)
    assert out is not None and out.shape == (1, 192) and out.dtype == np.float32
    np.testing.assert_array_equal(out, v)
    assert decode_embedding(blob[:-1]) is None  # truncated
    assert decode_embedding(blob + b"\0\0\0\0") is None  # wrong size for the shape
    assert decode_embedding(b"XXXX" + blob[4:]) is None  # foreign magic
    assert decode_embedding(b"") is None
    assert decode_embedding(b"RTVE\x01") is None
    assert decode_embedding(b"RTVE\x01\x09" + blob[6:]) is None  # absurd ndim
    with pytest.raises(ValueError, match="dimensions"):
        encode_embedding(np.float32(1.0))  # type: ignore[arg-type]


def test_get_or_compute_calls_fn_once_per_key() -> None:
    cache = EmbeddingCache(capacity=8)
    calls: list[bytes] = []

    def compute(data: bytes) -> np.ndarray:
        calls.append(data)
        return _vec(len(data))

    for _ in range(3):
        a = cache.get_or_compute(NS, b"clip-a", lambda: compute(b"clip-a"))
        b = cache.get_or_compute(NS, b"clip-bb", lambda: compute(b"clip-bb"))
    np.testing.assert_array_equal(a, _vec(6))
    np.testing.assert_array_equal(b, _vec(7))
    assert calls == [b"clip-a", b"clip-bb"]
    assert cache.stats()["local"] == {"hits": 4, "misses": 2}
    assert cache.health() == {
        "local": {"entries": 2, "capacity": 8},
        "redis": {"configured": False, "ok": False, "error": None},
    }


def test_get_or_compute_does_not_cache_failures() -> None:
    cache = EmbeddingCache()

    def boom() -> np.ndarray:
        raise RuntimeError("encoder failed")

    with pytest.raises(RuntimeError):
        cache.get_or_compute(NS, b"clip", boom)
    assert cache.get_or_compute(NS, b"clip", lambda: _vec(1)) is not None
    assert cache._inflight == {}


def test_thread_safety_smoke() -> None:
    cache = EmbeddingCache(capacity=16)
    calls = {"n": 0}
    calls_lock = threading.Lock()
    errors: list[BaseException] = []

    def compute(i: int) -> np.ndarray:
        with calls_lock:
            calls["n"] += 1
        time.sleep(0.001)
        return np.full(8, i, dtype=np.float32)

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(200):
                i = int(rng.integers(0, 8))
                out = cache.get_or_compute(NS, f"clip-{i}".encode(), partial(compute, i))
                assert out.shape == (8,) and float(out[0]) == i
                cache.put("emotion:x", f"k{rng.integers(0, 64)}", out)  # churn the LRU past its capacity
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache.local) <= 16
    assert cache._inflight == {}


def test_concurrent_get_or_compute_of_one_clip_computes_once() -> None:
    cache = EmbeddingCache()
    calls: list[int] = []
    start = threading.Barrier(8)

    def slow() -> np.ndarray:
        calls.append(1)
        time.sleep(0.05)  # long enough that every other thread arrives while this one computes
        return _vec(0)

    def worker() -> None:
        start.wait()
        np.testing.assert_array_equal(cache.get_or_compute(NS, b"same clip", slow), _vec(0))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    assert cache.stats()["local"] == {"hits": 7, "misses": 1}
    assert cache._inflight == {}
