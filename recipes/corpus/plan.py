"""The seeded corpus plan: utterance ``index`` -> (speaker, language, emotion, sentence, split), a pure
function of (seed, index, roster), so builds are reproducible, resumable and parallel without coordination.

Speakers are visited in a fresh seeded permutation every len(roster) utterances, so any prefix of the plan is
balanced over speakers and the first len(roster) utterances already hear every voice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from recipes.corpus.texts import LANG_SHARES, Sentence, SentenceGenerator
from recipes.corpus.voices import EMOTION_WEIGHTS, HELDOUT_TEACHERS, SPEAKERS, Speaker

# Per speaker: its teacher's language most, the other language next (voice-converted), mixed least.
NATIVE_SHARE, OTHER_SHARE, MIXED_SHARE = 0.50, 0.34, 0.16
VAL_SHARE = 0.02


@dataclass(frozen=True)
class PlannedUtterance:
    index: int
    id: str
    speaker: Speaker
    lang: str
    emotion: str
    sentence: Sentence
    split: str

    @property
    def path(self) -> str:
        return f"wavs/{self.speaker.name}/{self.id}.wav"


class CorpusPlan:
    """Maps plan indices to utterances for one seed and roster; owns the sentence generator."""

    def __init__(self, seed: int, speakers: list[str] | None = None, generator: SentenceGenerator | None = None):
        names = speakers if speakers else list(SPEAKERS)
        unknown = [n for n in names if n not in SPEAKERS]
        if unknown:
            raise ValueError(f"unknown speaker(s) {unknown}; names are listed in recipes/corpus/voices.py")
        self.seed = seed
        self.speakers = [SPEAKERS[n] for n in names]
        self.generator = generator if generator is not None else SentenceGenerator(seed)

    def speaker_at(self, index: int) -> Speaker:
        n = len(self.speakers)
        order = random.Random(f"{self.seed}:speakers:{index // n}").sample(range(n), n)
        return self.speakers[order[index % n]]

    def __getitem__(self, index: int) -> PlannedUtterance:
        speaker = self.speaker_at(index)
        rng = random.Random(f"{self.seed}:utt:{index}")
        shares = LANG_SHARES.get(self.generator.text_mix)
        if shares is None:
            other = "en" if speaker.native_lang == "zh" else "zh"
            langs, weights = [speaker.native_lang, other, "mixed"], [NATIVE_SHARE, OTHER_SHARE, MIXED_SHARE]
        else:
            langs, weights = list(shares), list(shares.values())
        lang = rng.choices(langs, weights=weights)[0]
        emotion = rng.choices(list(EMOTION_WEIGHTS), weights=list(EMOTION_WEIGHTS.values()))[0]
        if speaker.base_teacher in HELDOUT_TEACHERS:
            split = "heldout-teacher"
        else:
            split = "val" if rng.random() < VAL_SHARE else "train"
        uid = f"{index:06d}-{speaker.name}-{lang}-{emotion}"
        return PlannedUtterance(index, uid, speaker, lang, emotion, self.generator.sentence(lang, index), split)
