"""The phoneme vocabulary is closed, deterministic and round-trips through JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtvox.errors import ModelError
from rtvox.text import Frontend, Vocabulary
from rtvox.text.vocab import BOUNDARIES

CORPUS = [
    "我们下周去New York出差，顺便看看朋友。",
    "今天是2024年3月5日，气温-5℃，银行行长说利率还会下降3.5%。",
    "一点儿、玩儿、这儿、哪儿、一会儿；女儿和儿子都来了！",
    "嗯，呣，欸？哼！噢，哦，唷。",
    "The quick brown fox jumps over the lazy dog while Zhang and Nguyen watch.",
    "Judge church thin this ship measure sing yes; bottle button little water, hour, fire, tour, pure.",
    "Café naïve résumé façade rendezvous genre garage bourgeois croissant fjord Bach loch Dvořák.",
    "I paid $3.50 at 10:30 am on Jan. 5, 2024 — e.g. 25°C, 60 mph & 50% off.",
    "Llanelli Eisteddfod Hawaiʻi Māori brrr psst tsk uh-huh hmm GPU USB NASA xyz.",
]


def test_every_produced_phone_is_in_the_vocabulary(frontend: Frontend) -> None:
    vocab = Vocabulary.default()
    for text in CORPUS:
        for chunk in frontend.process(text).chunks:
            missing = [p for p in chunk.phonemes if p not in vocab]
            assert not missing, (text, missing)
            assert vocab.unk_id not in vocab.encode(chunk.phonemes)


def test_layout_is_fixed() -> None:
    vocab = Vocabulary.default()
    assert vocab.symbols[:4] == ("<pad>", "<unk>", "<bos>", "<eos>")
    assert vocab.symbols[4:10] == BOUNDARIES
    assert vocab.pad_id == 0 and vocab.id("<pad>") == 0
    assert "zh:zh" in vocab and "zh:ang4" in vocab and "zh:+r" in vocab and "zh:iz5" in vocab
    assert "en:ʃ" in vocab and "en:tʃ" in vocab and "en:ˈ" in vocab and "en:ɑːɹ" in vocab
    assert len(vocab) == 325
    assert Vocabulary.default() == vocab


def test_unknown_symbols_encode_to_unk() -> None:
    vocab = Vocabulary.default()
    assert vocab.encode(["zh:sh", "klingon", "#4"]) == [vocab.id("zh:sh"), vocab.unk_id, vocab.id("#4")]


def test_encode_decode_round_trip(frontend: Frontend) -> None:
    vocab = Vocabulary.default()
    phonemes = list(frontend.process("你好，hello!").chunks[0].phonemes)
    assert vocab.decode(vocab.encode(phonemes)) == phonemes
    with pytest.raises(ValueError, match="outside"):
        vocab.decode([len(vocab)])


def test_save_load_round_trip(tmp_path: Path) -> None:
    vocab = Vocabulary.default()
    path = tmp_path / "vocab.json"
    vocab.save(path)
    loaded = Vocabulary.load(path)
    assert loaded == vocab and loaded.symbols == vocab.symbols
    assert Vocabulary.from_dict(json.loads(path.read_text(encoding="utf-8"))) == vocab
    assert Vocabulary.from_dict(vocab.to_dict()).to_dict() == vocab.to_dict()


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"symbols": ["<unk>", "<pad>"]}, "start with"),
        ({"symbols": ["<pad>", "a"]}, "<unk>"),
        ({"symbols": ["<pad>", "<unk>", "a", "a"]}, "more than once"),
        ({"symbols": "abc"}, "list of strings"),
        ({"symbols": ["<pad>", "<unk>"], "version": 99}, "version 99"),
    ],
)
def test_bad_vocabularies_are_model_errors(data: dict[str, object], needle: str) -> None:
    with pytest.raises(ModelError, match=needle):
        Vocabulary.from_dict(data)


def test_missing_vocab_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        Vocabulary.load(tmp_path / "vocab.json")
