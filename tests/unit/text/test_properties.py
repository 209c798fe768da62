"""Property tests: any Unicode text either raises TextError or is fully accounted for in the tokens."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rtvox.errors import TextError
from rtvox.text import Frontend, Vocabulary
from rtvox.text.script import is_han, split_runs

# Arbitrary Unicode, plus characters that exercise the rules (polyphones, numbers, symbols, markup).
INTERESTING = list("一不儿得地还行长重了年月日号个点元") + list("0123456789.,-/:%$¥€£+=&@#~ []{}|，。！？")
ALPHABET = st.one_of(
    st.characters(),
    st.sampled_from(INTERESTING),
    st.sampled_from(list(string.ascii_letters)),
)
_FRONTEND = Frontend()


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(ALPHABET, max_size=60))
@example("A\u0d3b")  # found by Hypothesis: a Malayalam sign inside an English word sent espeak-ng into Malayalam
def test_nothing_is_silently_dropped(text: str) -> None:
    try:
        result = _FRONTEND.process(text, max_chunk_phonemes=24, first_chunk_phonemes=8)
    except TextError:
        return
    normalized = result.normalized
    assert not any(ch.isdigit() and ch.isascii() for ch in normalized), normalized
    for ch in normalized:
        if is_han(ch):
            assert any(ch in token.text for token in result.tokens), (text, normalized, ch)
    words = [normalized[r.start : r.end] for r in split_runs(normalized) if r.lang == "en"]
    token_words = [t.text for t in result.tokens if t.lang == "en"]
    assert token_words == words, (text, normalized)
    vocab = Vocabulary.default()
    for chunk in result.chunks:
        assert vocab.unk_id not in vocab.encode(chunk.phonemes), chunk
    spoken = [t for t in result.tokens if t.phonemes]
    assert sum(len(t.phonemes) + 1 for t in spoken) == sum(len(c.phonemes) for c in result.chunks)
