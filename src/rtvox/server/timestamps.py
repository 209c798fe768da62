"""Word and phoneme times from what the runtime reports per chunk.

An AudioChunk carries its phonemes (each word's phones followed by one boundary token #0..#4) and the mel frames
each lasted; a frame is HOP_LENGTH samples. A stress mark is a token of its own in the model; in the phoneme times
it joins the phone after it ("en:ˈaɪ"), from the mark's start. The words come from the frontend's tokens for the
same text: chunk k spans tokens[token_start:token_end], and each token with phones owns len(phones) + 1 entries
(its boundary).
"""

from __future__ import annotations

import logging

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.runtime.types import AudioChunk
from rtvox.server.schemas import PhonemeTime, WordTime
from rtvox.text import FrontendResult
from rtvox.text.g2p_en import STRESS_MARKS

log = logging.getLogger("rtvox.server")


class Timeline:
    """Accumulates times over a stream of chunks; times are seconds from the start of the utterance."""

    def __init__(self, front: FrontendResult) -> None:
        self.front = front
        self.offset = 0.0  # seconds of audio before the next chunk
        self._next_chunk = 0  # next frontend chunk expected
        self.words: list[WordTime] = []
        self.phonemes: list[PhonemeTime] = []

    def add(self, chunk: AudioChunk, samples_sent: int) -> tuple[list[WordTime], list[PhonemeTime]]:
        """Times of one chunk's words and phonemes; `samples_sent` is its length after any time-stretch."""
        raw_frames = sum(chunk.durations)
        scale = samples_sent / (raw_frames * HOP_LENGTH) if raw_frames else 1.0  # stretch factor, exactly
        frame_s = HOP_LENGTH / SAMPLE_RATE * scale
        starts = [0]
        for d in chunk.durations:
            starts.append(starts[-1] + d)
        phonemes = []
        stress: tuple[str, int, int] | None = None  # a stress mark waiting for its phone: (token, start, end)
        for p, s, e in zip(chunk.phonemes, starts, starts[1:], strict=False):
            phone = p.rpartition(":")[2]
            if phone in STRESS_MARKS and stress is None:  # a model token, not a phone: it marks the next one
                stress = (p, s, e)
                continue
            if stress is not None:  # "en:ˈ" + "en:aɪ" -> "en:ˈaɪ", from the mark's start
                p, s, stress = stress[0] + phone, stress[1], None
            phonemes.append(self._time(p, s, e, frame_s))
        if stress is not None:  # a mark with no phone after it in this chunk: kept as it came
            phonemes.append(self._time(*stress, frame_s))
        words = self._words(chunk, starts, frame_s)
        self.offset += samples_sent / SAMPLE_RATE
        self.words.extend(words)
        self.phonemes.extend(phonemes)
        return words, phonemes

    def _time(self, phoneme: str, start: int, end: int, frame_s: float) -> PhonemeTime:
        return PhonemeTime(
            phoneme=phoneme, start=_r(self.offset + start * frame_s), end=_r(self.offset + end * frame_s)
        )

    def _words(self, chunk: AudioChunk, starts: list[int], frame_s: float) -> list[WordTime]:
        if self._next_chunk >= len(self.front.chunks):
            return []
        planned = self.front.chunks[self._next_chunk]
        if tuple(planned.phonemes) != tuple(chunk.phonemes) or len(chunk.durations) != len(chunk.phonemes):
            log.warning("chunk %d does not match the frontend's plan; its words get no times", chunk.index)
            return []
        self._next_chunk += 1
        words = []
        position = 0
        for token in self.front.tokens[planned.token_start : planned.token_end]:
            if not token.phonemes:
                continue  # skipped (unspeakable) words have no phones and no time
            n = len(token.phonemes)
            words.append(
                WordTime(
                    text=token.text,
                    start=_r(self.offset + starts[position] * frame_s),
                    end=_r(self.offset + starts[position + n] * frame_s),
                )
            )
            position += n + 1  # the word's phones, then its boundary token
        return words


def _r(seconds: float) -> float:
    return round(seconds, 4)
