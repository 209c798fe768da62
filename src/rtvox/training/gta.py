"""Ground-truth-aligned (GTA) vocoder data: the acoustic model's teacher-forced mels paired with the recordings.

recipes/train/gta.py writes `gta-<k>.npz` files (Opus audio + 8-bit mel codes, frame k of a clip's mel covering
samples k·256 … k·256 + 255 of its audio); `rtvox train vocoder --gta-fraction F` trains a share F of every batch
on them: the generator hears the predicted mel and is scored against the recording, so it learns to render the
mels it will get at run time rather than only those computed from real audio.
"""

from __future__ import annotations

import io
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.errors import InputError

MEL_LO, MEL_HI = -11.6, 2.9  # pack.py's log-mel range
GTA_LEVELS = 256  # 0.057-nat steps: a quarter of the packed targets' (the vocoder hears fine detail)


def encode_gta_mel(mel: np.ndarray) -> np.ndarray:
    """Log-mel [T, 80] (natural log) → uint8 codes over [MEL_LO, MEL_HI]."""
    top = GTA_LEVELS - 1
    return np.clip(np.round((mel - MEL_LO) / (MEL_HI - MEL_LO) * top), 0, top).astype(np.uint8)


def decode_gta_mel(codes: np.ndarray, lo: float = MEL_LO, hi: float = MEL_HI, levels: int = GTA_LEVELS) -> np.ndarray:
    """uint8 codes [T, 80] → log-mel float32 [80, T]."""
    return (codes.astype(np.float32) * ((hi - lo) / (levels - 1)) + lo).T.copy()


@dataclass
class GtaClip:
    mel: np.ndarray  # float32 [80, T]: the acoustic model's teacher-forced log-mel
    wav: np.ndarray  # float32 [T · 256]: the recording it was forced on (trimmed as pack.py trims)
    utt: str = ""  # the utterance's id in the pack


def load_gta(directory: Path) -> list[GtaClip]:
    """Every gta-*.npz in `directory` (none → [])."""
    import soundfile as sf  # here: acoustic training runs where no codec library is installed

    clips: list[GtaClip] = []
    for path in sorted(directory.glob("gta-*.npz")):
        with np.load(path) as z:
            audio, audio_lengths, frames = z["audio"], z["audio_lengths"], z["frames"]
            utts = [str(u) for u in z["utt"]] if "utt" in z.files else [""] * len(frames)
            lo, hi, levels = (float(v) for v in z["mel_range"])
            delta = np.frombuffer(lzma.decompress(z["mel"].tobytes()), np.int8).reshape(-1, 80)
        codes = np.cumsum(delta.astype(np.int64), axis=0).astype(np.uint8)
        if len(codes) != int(frames.sum()):
            raise InputError(f"{path}: {len(codes)} mel frames against {int(frames.sum())} listed")
        a_off = np.concatenate([[0], np.cumsum(audio_lengths)])
        m_off = np.concatenate([[0], np.cumsum(frames)])
        for k, n in enumerate(frames):
            wav, sr = sf.read(io.BytesIO(audio[a_off[k] : a_off[k + 1]].tobytes()), dtype="float32")
            if sr != SAMPLE_RATE:
                raise InputError(f"{path}: clip {k} at {sr} Hz")
            wav = np.pad(wav, (0, max(0, int(n) * HOP_LENGTH - len(wav))))[: int(n) * HOP_LENGTH]
            mel = decode_gta_mel(codes[m_off[k] : m_off[k + 1]], lo, hi, int(levels))
            clips.append(GtaClip(mel, wav, utts[k]))
    return clips


def save_gta(path: Path, clips: list[GtaClip]) -> int:
    """Write `clips` as one gta file (atomically): Opus audio + 8-bit delta-coded, LZMA-compressed mel codes.
    Returns its size in bytes."""
    import soundfile as sf

    blobs = []
    for clip in clips:
        buf = io.BytesIO()
        sf.write(buf, clip.wav, SAMPLE_RATE, format="OGG", subtype="OPUS", compression_level=0.8)
        blobs.append(np.frombuffer(buf.getvalue(), np.uint8))
    codes = np.concatenate([encode_gta_mel(c.mel.T) for c in clips])
    delta = np.diff(codes.astype(np.int16), axis=0, prepend=0).astype(np.int8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(
        tmp,
        audio=np.concatenate(blobs),
        audio_lengths=np.asarray([len(b) for b in blobs], np.int64),
        mel=np.frombuffer(lzma.compress(delta.tobytes(), preset=9), np.uint8),
        frames=np.asarray([c.mel.shape[1] for c in clips], np.int64),
        utt=np.asarray([c.utt for c in clips]),
        mel_range=np.asarray([MEL_LO, MEL_HI, GTA_LEVELS], np.float32),
    )
    tmp.replace(path)
    return path.stat().st_size


def random_gta_segments(
    clips: list[GtaClip], n: int, frames: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """n random aligned segments: (mel float32 [n, 80, frames], audio float32 [n, frames · 256]); a clip shorter
    than a segment is zero-padded in the audio and padded with its quietest level in the mel."""
    mel = np.full((n, 80, frames), MEL_LO, np.float32)
    wav = np.zeros((n, frames * HOP_LENGTH), np.float32)
    for row in range(n):
        clip = clips[int(rng.integers(len(clips)))]
        total = clip.mel.shape[1]
        start = int(rng.integers(total - frames + 1)) if total > frames else 0
        take = min(frames, total)
        mel[row, :, :take] = clip.mel[:, start : start + take]
        wav[row, : take * HOP_LENGTH] = clip.wav[start * HOP_LENGTH : (start + take) * HOP_LENGTH]
    return mel, wav
