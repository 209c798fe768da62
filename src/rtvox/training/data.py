"""Training data: packed shards (recipes/train/pack.py) held in memory, length-bucketed batches, collation.

A packed acoustic shard is an LZMA-compressed .npz of concatenated per-utterance arrays (phoneme ids, 6-bit
log-mel codes delta-coded along time, frame F0 codes, GE2E embeddings, labels); a vocoder shard holds
Opus-coded audio. Everything is decoded once at load; batches are numpy slices turned into tensors.
"""

from __future__ import annotations

import dataclasses
import io
import json
import lzma
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rtvox.errors import InputError


@dataclass
class PackInfo:
    """pack.json: speaker/emotion/language tables and the quantization constants."""

    speakers: list[str]
    emotions: list[str]
    mel_lo: float
    mel_hi: float
    mel_levels: int
    f0_lo: float
    f0_hi: float
    langs: tuple[str, ...] = ("zh", "en", "mixed")  # what the utterances' lang codes index (recipes/train/pack.py)

    @classmethod
    def load(cls, path: Path) -> PackInfo:
        """InputError naming the problem when the folder is not a packed dataset (missing or broken pack.json)."""
        if not path.parent.is_dir():
            raise InputError(f"data folder {path.parent} does not exist; pack a corpus with recipes/train/pack.py")
        if not path.is_file():
            raise InputError(f"{path.parent} is not a packed dataset (no pack.json); run recipes/train/pack.py first")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                speakers=list(data["speakers"]),
                emotions=list(data["emotions"]),
                mel_lo=float(data["mel_range"][0]),
                mel_hi=float(data["mel_range"][1]),
                mel_levels=int(data.get("mel_levels", 256)),
                f0_lo=float(data["f0_range"][0]),
                f0_hi=float(data["f0_range"][1]),
                langs=tuple(str(x) for x in data.get("langs", ("zh", "en", "mixed"))),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            what = f"lacks {exc}" if isinstance(exc, KeyError) else f"is not valid ({exc})"
            raise InputError(f"{path} {what}; re-run recipes/train/pack.py") from None


@dataclass
class AcousticSet:
    """All utterances of the loaded shards, concatenated; offsets index them."""

    info: PackInfo
    ids: np.ndarray  # uint16 [Σ N]
    mel: np.ndarray  # uint8 codes [Σ T, 80]
    f0: np.ndarray  # uint8 codes [Σ T], 0 = unvoiced
    ph_off: np.ndarray  # int64 [U + 1]
    mel_off: np.ndarray  # int64 [U + 1]
    ge2e: np.ndarray  # float32 [U, 256]
    speaker: np.ndarray  # int64 [U]
    emotion: np.ndarray  # int64 [U]
    lang: np.ndarray  # int64 [U]
    utt: list[str]

    def __len__(self) -> int:
        return len(self.utt)

    @property
    def mel_lengths(self) -> np.ndarray:
        return np.diff(self.mel_off)

    @property
    def hours(self) -> float:
        return float(self.mel_off[-1]) * 256 / 24000 / 3600


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths.astype(np.int64))])


def drop_ids(data: AcousticSet, drop: Collection[int]) -> AcousticSet:
    """The same utterances with the phoneme ids in `drop` removed (a model's skip_symbols: they get no frames)."""
    if not drop:
        return data
    keep = ~np.isin(data.ids, np.asarray(sorted(drop), dtype=data.ids.dtype))
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return dataclasses.replace(data, ids=data.ids[keep], ph_off=kept_before[data.ph_off])


def load_acoustic(directory: Path, shards: list[str] | None = None) -> AcousticSet:
    """Load every acoustic-*.npz.xz in `directory` (or the named ones)."""
    info = PackInfo.load(directory / "pack.json")
    files = [directory / s for s in shards] if shards else sorted(directory.glob("acoustic-*.npz.xz"))
    if not files:
        raise InputError(f"no acoustic-*.npz.xz shards in {directory}; run recipes/train/pack.py first")
    parts: list[dict[str, np.ndarray]] = []
    for path in files:
        with np.load(io.BytesIO(lzma.decompress(path.read_bytes()))) as z:
            parts.append({k: z[k] for k in z.files})
    mel = np.concatenate([np.cumsum(p["mel_delta"].astype(np.int64), axis=0).astype(np.uint8) for p in parts])
    mel_len = np.concatenate([p["mel_len"] for p in parts])
    ph_len = np.concatenate([p["ph_len"] for p in parts])
    return AcousticSet(
        info=info,
        ids=np.concatenate([p["ids"] for p in parts]),
        mel=mel,
        f0=np.concatenate([p["f0"] for p in parts]),
        ph_off=_offsets(ph_len),
        mel_off=_offsets(mel_len),
        ge2e=np.concatenate([p["ge2e"] for p in parts]).astype(np.float32),
        speaker=np.concatenate([p["speaker"] for p in parts]).astype(np.int64),
        emotion=np.concatenate([p["emotion"] for p in parts]).astype(np.int64),
        lang=np.concatenate([p["lang"] for p in parts]).astype(np.int64),
        utt=[str(u) for p in parts for u in p["utt"]],
    )


def dequantize_mel(codes: Tensor, info: PackInfo) -> Tensor:
    return codes.float() * ((info.mel_hi - info.mel_lo) / (info.mel_levels - 1)) + info.mel_lo


def dequantize_f0(codes: Tensor, info: PackInfo) -> Tensor:
    """Codes -> log F0 (natural log of Hz); 0 where unvoiced (check codes > 0 for the voicing)."""
    lo, hi = np.log(info.f0_lo), np.log(info.f0_hi)
    return torch.where(
        codes > 0, lo + (codes.float() - 1) / 254 * (hi - lo), torch.zeros_like(codes, dtype=torch.float)
    )


def frame_log_f0(data: AcousticSet) -> tuple[np.ndarray, np.ndarray]:
    """(log F0 of every frame (natural log of Hz; meaningless where unvoiced), voiced mask) from the packed codes."""
    lo, hi = np.log(data.info.f0_lo), np.log(data.info.f0_hi)
    return lo + (data.f0.astype(np.float64) - 1) / 254 * (hi - lo), data.f0 > 0


def frame_energy(data: AcousticSet) -> np.ndarray:
    """The energy of every frame as the trainer's targets take it: the mean of its log-mel bands, float64 [Σ T]."""
    scale = (data.info.mel_hi - data.info.mel_lo) / (data.info.mel_levels - 1)
    return data.mel.mean(axis=1, dtype=np.float64) * scale + data.info.mel_lo


def speaker_prosody_stats(data: AcousticSet) -> np.ndarray:
    """Per speaker id: (mean, std) of voiced log F0 and (mean, std) of frame energy (mean log-mel), over all
    of that speaker's utterances (every emotion): float32 [n_speakers, 4]. Pitch and energy targets normalized
    by these keep what an emotion does to the level and range of a voice, which per-utterance z-scores erase."""
    energy = frame_energy(data)
    log_f0, voiced = frame_log_f0(data)
    frame_speaker = np.repeat(data.speaker, np.diff(data.mel_off))
    n = int(data.speaker.max()) + 1 if len(data.speaker) else 0
    out = np.zeros((n, 4), np.float32)
    out[:, 1] = out[:, 3] = 1.0
    for spk in range(n):
        frames = frame_speaker == spk
        if not frames.any():
            continue
        e = energy[frames]
        out[spk, 2:] = e.mean(), max(float(e.std()), 1e-2)
        f = log_f0[frames & voiced]
        if f.size:
            out[spk, :2] = f.mean(), max(float(f.std()), 1e-2)
    return out


class LengthBatcher:
    """Random batches of utterances of similar length, capped by total frames (padding stays small)."""

    def __init__(self, lengths: np.ndarray, max_frames: int, seed: int, max_batch: int = 128) -> None:
        self.lengths = lengths
        self.max_frames = max_frames
        self.max_batch = max_batch
        self.rng = np.random.default_rng(seed)

    def epoch(self) -> list[np.ndarray]:
        # Sort by length with random tie-breaking, cut into batches, shuffle the batches.
        noise = self.rng.random(len(self.lengths))
        order = np.lexsort((noise, self.lengths))
        batches: list[np.ndarray] = []
        start = 0
        while start < len(order):
            end = start
            while end < len(order) and end - start < self.max_batch:
                if (end - start + 1) * self.lengths[order[end]] > self.max_frames and end > start:
                    break
                end += 1
            batches.append(order[start:end])
            start = end
        self.rng.shuffle(batches)  # type: ignore[arg-type,unused-ignore]
        return batches


SPEAKER_REFS: tuple[str, ...] = ("own", "neutral", "neutral-own", "cross-lingual")
CROSS_LINGUAL_SHARE = 0.5  # --speaker-ref cross-lingual: the share of rows conditioned on the other language


class NeutralReferences:
    """Which utterance's GE2E embedding conditions each training row ("neutral" speaker references).

    An utterance's own embedding carries its emotion: on corpus-v3b a nearest-centroid classifier names the
    emotion of unseen speakers' clips from their speaker-centred GE2E embeddings 72.5 % of the time (5 emotions;
    docs/QUALITY.md). Conditioned on it, the acoustic model takes the emotion from the speaker input and leaves
    the label unused, while at inference a built-in voice is the mean of neutral clips and a clone a neutral
    clip. So each row gets the embedding of another neutral utterance of the same speaker, drawn at random
    (itself only when the speaker has no other; its own when the speaker has no neutral clip): as at inference,
    the reference is a different, neutral clip of the voice, and the emotion has to come from the label.

    With `keep_neutral_own` ("neutral-own"), neutral rows keep their own embedding and only emotional rows draw
    another clip. Every reference is still a neutral clip, so nothing about the emotion leaks, while a neutral
    row teaches the exact mapping that cloning asks for (speak so that the output's embedding is the input's):
    a CPU fine-tune of 8.1.0 with "neutral" (run T12c, docs/QUALITY.md) raised emotion recognition from 74.2 to
    85.0 % but lowered the clones' cosine to their references from 0.715 to 0.652 — another clip of the speaker
    pulls each voice toward its speaker's mean, which is what the built-in voices are."""

    def __init__(self, data: AcousticSet, keep_neutral_own: bool = False) -> None:
        self.speaker = data.speaker
        neutral = data.info.emotions.index("neutral") if "neutral" in data.info.emotions else -1
        self.is_neutral = data.emotion == neutral
        self.keep_neutral_own = keep_neutral_own
        self.pools = {
            int(spk): np.flatnonzero((data.speaker == spk) & self.is_neutral) for spk in np.unique(data.speaker)
        }

    def pick(self, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The reference utterance of each row of `index` (int64 [B])."""
        out = np.asarray(index, dtype=np.int64).copy()
        for row, i in enumerate(out):
            pool = self.pools[int(self.speaker[i])]
            if pool.size == 0 or (pool.size == 1 and pool[0] == i) or (self.keep_neutral_own and self.is_neutral[i]):
                continue
            choice = pool[rng.integers(pool.size)]
            while choice == i:
                choice = pool[rng.integers(pool.size)]
            out[row] = choice
        return out


class CrossLingualReferences:
    """--speaker-ref cross-lingual: each row keeps its own GE2E embedding, except a share of them
    (CROSS_LINGUAL_SHARE) that get the embedding of a random clip of the same speaker and emotion in the other
    language (zh ↔ en; a mixed row either), where the speaker has one.

    Why: a clone is closer to its own reference than to any built-in voice when it speaks its clip's language and
    loses when it speaks the other (docs/QUALITY.md, "8.9.1": every reference, both sets). GE2E embeddings carry
    the clip's language, and with "own" references a Mandarin row was only ever conditioned on a Mandarin clip, so
    an English clip's embedding speaking Mandarin lies where no training row was and drifts to the Mandarin
    speakers. The corpus speaks each base voice in both languages (by voice conversion), so a row's speaker is the
    same voice whichever language its reference clip is in. Emotion stays as with "own": the reference has the
    row's emotion, so what the embedding says about it is unchanged."""

    def __init__(self, data: AcousticSet, share: float = CROSS_LINGUAL_SHARE) -> None:
        self.speaker, self.emotion, self.lang = data.speaker, data.emotion, data.lang
        self.share = share
        langs = list(data.info.langs)
        self.zh, self.en = (langs.index(x) if x in langs else -1 for x in ("zh", "en"))
        self.pools: dict[tuple[int, int, int], np.ndarray] = {}
        for key in {(int(s), int(e), int(g)) for s, e, g in zip(data.speaker, data.emotion, data.lang, strict=True)}:
            spk, emo, lang = key
            self.pools[key] = np.flatnonzero((data.speaker == spk) & (data.emotion == emo) & (data.lang == lang))

    def _others(self, lang: int) -> list[int]:
        if lang == self.zh:
            return [self.en]
        if lang == self.en:
            return [self.zh]
        return [self.zh, self.en]  # mixed: either

    def pick(self, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The reference utterance of each row of `index` (int64 [B])."""
        out = np.asarray(index, dtype=np.int64).copy()
        for row, i in enumerate(out):
            if rng.random() >= self.share:
                continue
            others = self._others(int(self.lang[i]))
            lang = others[int(rng.integers(len(others)))]
            pool = self.pools.get((int(self.speaker[i]), int(self.emotion[i]), lang))
            if pool is not None and pool.size:
                out[row] = pool[rng.integers(pool.size)]
        return out

    def coverage(self) -> float:
        """The share of rows that have a clip of the other language to draw (the rest keep their own)."""
        have = [
            any((self.pools.get((int(s), int(e), g)) is not None) for g in self._others(int(g0)) if g >= 0)
            for s, e, g0 in zip(self.speaker, self.emotion, self.lang, strict=True)
        ]
        return float(np.mean(have)) if have else 0.0


def speaker_references(data: AcousticSet, mode: str) -> NeutralReferences | CrossLingualReferences | None:
    """The trainers' --speaker-ref: NeutralReferences for "neutral" and "neutral-own" (neutral rows keep their
    own), CrossLingualReferences for "cross-lingual", None (each row's own embedding) for "own"."""
    if mode not in SPEAKER_REFS:
        raise ValueError(f"speaker_ref must be one of {', '.join(SPEAKER_REFS)}, got {mode!r}")
    if mode == "own":
        return None
    if mode == "cross-lingual":
        return CrossLingualReferences(data)
    return NeutralReferences(data, keep_neutral_own=mode == "neutral-own")


def collate_acoustic(
    data: AcousticSet, index: np.ndarray, device: torch.device, refs: np.ndarray | None = None
) -> dict[str, Tensor]:
    """Padded tensors for the utterances `index`: ids [B, N], ph_mask, mel [B, 80, T], frame_mask, f0 [B, T]
    (log Hz, 0 unvoiced), voiced, ge2e [B, 256] (of the utterances `refs` when given, else their own), emotion [B],
    speaker [B]."""
    n = [int(data.ph_off[i + 1] - data.ph_off[i]) for i in index]
    t = [int(data.mel_off[i + 1] - data.mel_off[i]) for i in index]
    b, n_max, t_max = len(index), max(n), max(t)
    ids = np.zeros((b, n_max), np.int64)
    mel = np.zeros((b, t_max, data.mel.shape[1]), np.uint8)
    f0 = np.zeros((b, t_max), np.uint8)
    for row, i in enumerate(index):
        ids[row, : n[row]] = data.ids[data.ph_off[i] : data.ph_off[i + 1]]
        mel[row, : t[row]] = data.mel[data.mel_off[i] : data.mel_off[i + 1]]
        f0[row, : t[row]] = data.f0[data.mel_off[i] : data.mel_off[i + 1]]
    n_t = torch.tensor(n, device=device)
    t_t = torch.tensor(t, device=device)
    mel_t = dequantize_mel(torch.from_numpy(mel).to(device), data.info).transpose(1, 2)
    frame_mask = torch.arange(t_max, device=device)[None] < t_t[:, None]
    mel_t = torch.where(frame_mask[:, None, :], mel_t, torch.full_like(mel_t, float(np.log(1e-5))))
    f0_codes = torch.from_numpy(f0).to(device)
    return {
        "ids": torch.from_numpy(ids).to(device),
        "ph_mask": torch.arange(n_max, device=device)[None] < n_t[:, None],
        "ph_len": n_t,
        "mel": mel_t,
        "frame_mask": frame_mask,
        "mel_len": t_t,
        "log_f0": dequantize_f0(f0_codes, data.info),
        "voiced": f0_codes > 0,
        "ge2e": torch.from_numpy(data.ge2e[index if refs is None else refs]).to(device),
        "emotion": torch.from_numpy(data.emotion[index]).to(device),
        "speaker": torch.from_numpy(data.speaker[index]).to(device),
    }


def load_vocoder_audio(directory: Path) -> list[np.ndarray]:
    """Decode every vocoder-*.npz (Opus blobs) in `directory` into float32 clips at 24 kHz."""
    import soundfile as sf  # here, not at the top: acoustic training runs where no codec library is installed

    clips: list[np.ndarray] = []
    for path in sorted(directory.glob("vocoder-*.npz")):
        with np.load(path) as z:
            data, lengths = z["data"], z["lengths"]
        for start, length in zip(_offsets(lengths)[:-1], lengths, strict=True):
            wav, sr = sf.read(io.BytesIO(data[start : start + length].tobytes()), dtype="float32")
            assert sr == 24000, f"{path}: {sr} Hz"
            clips.append(wav)
    if not clips:
        raise InputError(f"no vocoder-*.npz shards in {directory}; run recipes/train/pack.py first")
    return clips


def random_segments(clips: list[np.ndarray], n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """n random segments of `length` samples (zero-padded when a clip is shorter): float32 [n, length]."""
    out = np.zeros((n, length), np.float32)
    for row in range(n):
        clip = clips[int(rng.integers(len(clips)))]
        if len(clip) > length:
            start = int(rng.integers(len(clip) - length))
            out[row] = clip[start : start + length]
        else:
            out[row, : len(clip)] = clip
    return out


def describe(data: Any) -> str:
    if isinstance(data, AcousticSet):
        return f"{len(data)} utterances, {data.hours:.2f} h, {len(set(data.speaker.tolist()))} speakers"
    return str(data)
