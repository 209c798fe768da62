"""The emotion prosody prior: per-emotion prosody corrections stored in a model's config.json and applied at
inference through the acoustic encode step's `prosody` input.

Why: the learned emotion conditioning of rtvox-small 3.0.0 moves its pitch, energy and duration predictions only
15-20 % of the way the training data's emotional speech differs from the same speakers' neutral speech, so the
emotion judge hears "neutral". The prior puts the rest back explicitly. It is data-derived
(rtvox.training.prosody_prior: the corpus's per-emotion shift relative to each speaker's neutral, minus what the
model already does on its own), not learned, and not tuned on evaluation sentences.

    config.json  "emotion_prosody": {"happy": {"pitch_shift": .., "pitch_range": .., "energy_shift": ..,
                                                "duration": .., "tilt": ..}, ..., "source": {...}}

A model directory without the key has the identity prior. Units: pitch_shift and energy_shift in the model's
speaker z-scores (added to every phoneme), pitch_range a ratio on the deviation from the utterance mean,
duration a ratio on predicted frames: these four are the acoustic model's `prosody` input row. tilt (nats of
log-mel from the lowest to the highest band) is added to the decoded mel by the host as a centred ramp over
the bands, so it changes the spectral slope and not the mean level. With emotion strength α a row is
(shift·α, range**α, energy·α, duration**α) and the tilt tilt·α: α = 0 and neutral are the identity, and α
scales the prior as it scales the learned embedding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from rtvox.constants import EMOTIONS
from rtvox.errors import ModelError

# Order of the four values in the acoustic model's `prosody` input.
PROSODY_FIELDS: tuple[str, ...] = ("pitch_shift", "pitch_range", "energy_shift", "duration")
# Every field of a config entry: the row's four and the host-side spectral tilt.
SHIFT_FIELDS: tuple[str, ...] = (*PROSODY_FIELDS, "tilt")
ProsodyRow = tuple[float, float, float, float]
IDENTITY_ROW: ProsodyRow = (0.0, 1.0, 0.0, 1.0)
SOURCE_KEY = "source"
_Entry = TypeVar("_Entry")


def label_entry(entries: Mapping[str, _Entry], emotion: str | None) -> _Entry | None:
    """A label's entry in a per-emotion table; None for no emotion, neutral (the identity) or a label without one."""
    return None if emotion is None or emotion == "neutral" else entries.get(emotion)


@dataclass(frozen=True)
class ProsodyShift:
    """One emotion's correction relative to the voice's neutral speech."""

    pitch_shift: float = 0.0  # added to the predicted pitch (speaker z units)
    pitch_range: float = 1.0  # multiplies the pitch deviation from the utterance mean (> 0)
    energy_shift: float = 0.0  # added to the predicted energy (speaker z units)
    duration: float = 1.0  # multiplies the predicted frames per phoneme (> 0)
    tilt: float = 0.0  # added to the decoded log-mel's slope over the bands (host side, `tilt_mel`)

    def __post_init__(self) -> None:
        values = (self.pitch_shift, self.pitch_range, self.energy_shift, self.duration, self.tilt)
        if not all(math.isfinite(v) for v in values) or self.pitch_range <= 0 or self.duration <= 0:
            raise ValueError(f"prosody shift needs finite values and positive range and duration, got {values}")

    def row(self, alpha: float) -> ProsodyRow:
        """The `prosody` input row at emotion strength `alpha`."""
        return (
            self.pitch_shift * alpha,
            self.pitch_range**alpha,
            self.energy_shift * alpha,
            self.duration**alpha,
        )

    def to_dict(self) -> dict[str, float]:
        return {name: round(float(getattr(self, name)), 4) for name in SHIFT_FIELDS}


@dataclass(frozen=True)
class EmotionProsody:
    """Emotion label -> ProsodyShift (labels left out, and neutral, are the identity), plus provenance."""

    shifts: dict[str, ProsodyShift] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)  # data, shards, model version, calibration, ...

    def _shift(self, emotion: str | None) -> ProsodyShift | None:
        """The label's correction; None for no emotion, neutral or a label without one."""
        return label_entry(self.shifts, emotion)

    def row(self, emotion: str | None, alpha: float) -> ProsodyRow:
        """The `prosody` row of a label request; IDENTITY_ROW for no emotion, neutral or an unknown label."""
        shift = self._shift(emotion)
        return IDENTITY_ROW if shift is None else shift.row(alpha)

    def tilt(self, emotion: str | None, alpha: float) -> float:
        """The spectral tilt added to the decoded mel of a label request (0 for none and neutral)."""
        shift = self._shift(emotion)
        return 0.0 if shift is None else shift.tilt * alpha

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmotionProsody:
        if not isinstance(data, dict):
            raise ModelError("config.json: emotion_prosody must be an object of emotion -> {pitch_shift, ...}")
        shifts: dict[str, ProsodyShift] = {}
        for key, value in data.items():
            if key == SOURCE_KEY:
                continue
            if key not in EMOTIONS or not isinstance(value, dict) or set(value) - set(SHIFT_FIELDS):
                raise ModelError(
                    f"config.json: emotion_prosody[{key!r}] must be an emotion of {', '.join(EMOTIONS)} with "
                    f"fields among {', '.join(SHIFT_FIELDS)}; recompute it with `rtvox train prosody-prior`"
                )
            try:
                shifts[key] = ProsodyShift(**{k: float(v) for k, v in value.items()})
            except (TypeError, ValueError) as e:
                raise ModelError(f"config.json: emotion_prosody[{key!r}]: {e}") from e
        source = data.get(SOURCE_KEY, {})
        return cls(shifts, dict(source) if isinstance(source, dict) else {})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {e: self.shifts[e].to_dict() for e in EMOTIONS if e in self.shifts}
        if self.source:
            out[SOURCE_KEY] = self.source
        return out


def tilt_ramp(n_mels: int, device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """band/n_mels − centre [n_mels], mean 0: the spectral tilt's direction (see `tilt_mel`)."""
    return (torch.arange(n_mels, device=device, dtype=dtype) - (n_mels - 1) / 2) / n_mels


def tilt_mel(mel: Tensor, tilt: float) -> Tensor:
    """mel [n_mels, T] (log) + tilt·(band/n_mels − centre): the least-squares slope of every frame's log spectrum
    against band/n_mels (the emotion judge's tilt) rises by exactly `tilt`; the mean over bands is unchanged."""
    if tilt == 0.0:
        return mel
    return mel + tilt * tilt_ramp(mel.shape[0], mel.device, mel.dtype)[:, None]


@dataclass(frozen=True)
class EmotionSpeakerShift:
    """Emotion label -> a direction in speaker-embedding space (config.json `emotion_speaker_shift`).

    Models trained on each clip's own GE2E embedding (rtvox-small up to 8.1.0) learned to read much of an emotion
    from the speaker input, because that embedding carries it (benchmarks/probes/ge2e_emotion_leak.py). A label
    request moves its voice the way the training data's emotional clips move their speaker's embedding:
    unit(voice + α·d_e), d_e = the data's mean speaker-centred shift of emotion e
    (rtvox.training.speaker_shift). The model then renders the emotion from inputs it was trained on. Neutral,
    no emotion, labels without an entry and emotion reference clips keep the voice as it is."""

    shifts: dict[str, tuple[float, ...]] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)

    def apply(self, embedding: np.ndarray, emotion: str | None, alpha: float) -> np.ndarray:
        """The speaker embedding (float32 numpy [256]) a label request at strength `alpha` is conditioned on."""
        shift = label_entry(self.shifts, emotion)
        if shift is None or alpha == 0:
            return embedding
        moved = np.asarray(embedding, np.float32) + np.float32(alpha) * np.asarray(shift, np.float32)
        norm = float(np.linalg.norm(moved))
        return moved / norm if norm > 0 else np.asarray(embedding, np.float32)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmotionSpeakerShift:
        from rtvox.constants import SPEAKER_EMBED_DIM

        if not isinstance(data, dict):
            raise ModelError("config.json: emotion_speaker_shift must be an object of emotion -> [256 numbers]")
        shifts: dict[str, tuple[float, ...]] = {}
        for key, value in data.items():
            if key == SOURCE_KEY:
                continue
            ok = key in EMOTIONS and key != "neutral" and isinstance(value, list) and len(value) == SPEAKER_EMBED_DIM
            if ok:
                try:
                    vector = tuple(float(v) for v in value)
                except (TypeError, ValueError):
                    ok = False
                else:
                    ok = all(math.isfinite(v) for v in vector)
            if not ok:
                raise ModelError(
                    f"config.json: emotion_speaker_shift[{key!r}] must be a non-neutral emotion of "
                    f"{', '.join(EMOTIONS)} with {SPEAKER_EMBED_DIM} finite numbers; recompute it with "
                    "`rtvox train speaker-shift`"
                )
            shifts[key] = vector
        source = data.get(SOURCE_KEY, {})
        return cls(shifts, dict(source) if isinstance(source, dict) else {})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {e: [round(v, 5) for v in self.shifts[e]] for e in EMOTIONS if e in self.shifts}
        if out and self.source:
            out[SOURCE_KEY] = self.source
        return out
