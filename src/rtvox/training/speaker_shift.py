"""The emotion speaker shift (rtvox.models.prosody.EmotionSpeakerShift) from a packed corpus.

For each emotion e and each training speaker with at least `min_clips` clips of both e and neutral, the
difference between the unit mean GE2E embedding of its e clips and that of its neutral clips; d_e is the mean of
those differences over speakers. `rtvox train speaker-shift --data D --model M` writes it into M/config.json; run
`rtvox train prosody-prior` afterwards, so the prior is solved with the shift in place.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from rtvox.errors import InputError
from rtvox.models.prosody import EmotionSpeakerShift
from rtvox.training.data import AcousticSet, load_acoustic


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def speaker_shift(
    data: AcousticSet, min_clips: int = 3, source: dict[str, object] | None = None
) -> EmotionSpeakerShift:
    """d_e for every non-neutral emotion of `data` that at least one speaker has enough clips of."""
    names = data.info.emotions
    if "neutral" not in names:
        raise InputError("the packed data has no neutral clips: the speaker shift is measured from them")
    neutral = names.index("neutral")
    found: dict[str, list[np.ndarray]] = {}
    for s in range(len(data.info.speakers)):
        rows = data.speaker == s
        base = rows & (data.emotion == neutral)
        if base.sum() < min_clips:
            continue
        centre = _unit(data.ge2e[base].mean(0))
        for e, name in enumerate(names):
            pick = rows & (data.emotion == e)
            if e != neutral and pick.sum() >= min_clips:
                found.setdefault(name, []).append(_unit(data.ge2e[pick].mean(0)) - centre)
    shifts = {name: tuple(float(x) for x in np.mean(v, axis=0)) for name, v in found.items()}
    info = dict(source or {}) | {"speakers": {name: len(v) for name, v in found.items()}, "min_clips": min_clips}
    return EmotionSpeakerShift(shifts, info)


def write_speaker_shift(model_dir: Path, shift: EmotionSpeakerShift) -> None:
    """Set `emotion_speaker_shift` in MODEL_DIR/config.json (atomically); every other key stays as it was."""
    from rtvox.training.prosody_prior import update_config

    update_config(model_dir, lambda c: dataclasses.replace(c, emotion_speaker_shift=shift))


def speaker_shift_command(data_dir: Path, model_dir: Path) -> EmotionSpeakerShift:
    """`rtvox train speaker-shift`: measure d_e on the packed data and write it into MODEL/config.json."""
    shift = speaker_shift(load_acoustic(data_dir), source={"data": str(data_dir)})
    write_speaker_shift(model_dir, shift)
    return shift
