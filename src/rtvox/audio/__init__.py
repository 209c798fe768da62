"""Audio in and out: decode, resample, loudness, silence trimming, reference checks, mel features, encode.

Every name is imported lazily from its module: decoding an upload or encoding a response never loads torch,
and the mel module (torch only) works where the codec libraries are not installed (the GPU training image).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    **dict.fromkeys(("AudioSource", "decode_audio", "load_audio", "resample", "to_mono"), "rtvox.audio.decode"),
    **dict.fromkeys(
        ("MEDIA_TYPES", "StreamEncoder", "check_format", "encode_audio", "write_audio"), "rtvox.audio.encode"
    ),
    **dict.fromkeys(
        ("integrated_loudness", "normalize_loudness", "peak_limit", "rms_dbfs", "trim_silence"),
        "rtvox.audio.loudness",
    ),
    **dict.fromkeys(("check_reference", "prepare_reference", "prepare_reference_array"), "rtvox.audio.reference"),
    **dict.fromkeys(("MelSpectrogram", "mel_filterbank"), "rtvox.audio.mel"),
}

if TYPE_CHECKING:
    from rtvox.audio.decode import AudioSource, decode_audio, load_audio, resample, to_mono
    from rtvox.audio.encode import MEDIA_TYPES, StreamEncoder, check_format, encode_audio, write_audio
    from rtvox.audio.loudness import integrated_loudness, normalize_loudness, peak_limit, rms_dbfs, trim_silence
    from rtvox.audio.mel import MelSpectrogram, mel_filterbank
    from rtvox.audio.reference import check_reference, prepare_reference, prepare_reference_array


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rtvox.audio' has no attribute {name!r}")


__all__ = [
    "MEDIA_TYPES",
    "AudioSource",
    "MelSpectrogram",
    "StreamEncoder",
    "check_format",
    "check_reference",
    "decode_audio",
    "encode_audio",
    "integrated_loudness",
    "load_audio",
    "mel_filterbank",
    "normalize_loudness",
    "peak_limit",
    "prepare_reference",
    "prepare_reference_array",
    "resample",
    "rms_dbfs",
    "to_mono",
    "trim_silence",
    "write_audio",
]
