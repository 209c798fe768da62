"""Importers that turn real speech datasets into corpus manifests, so the trainer reads real and
synthetic data the same way:
``python -m recipes.corpus.importers {ljspeech,aishell3} ROOT --out DIR [--convert]``.

- LJSpeech layout: ROOT/metadata.csv with ``id|text|normalized`` lines, ROOT/wavs/<id>.wav (22.05 kHz).
- AISHELL-3 layout: ROOT/{train,test}/content.txt with ``SSB00050001.wav<TAB>广 guang3 州 zhou1 ...``
  lines and ROOT/{train,test}/wav/<speaker>/<file>.wav (44.1 kHz); ROOT may also be the train or test
  folder itself.

Without --convert, records point at the original wavs (``sample_rate`` gives their rate; the trainer
resamples).
With --convert, 24 kHz mono 16-bit copies are written under DIR/wavs/<speaker>/.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import soundfile as sf
from recipes.corpus.audio import SAMPLE_RATE, read_wav, resample, write_wav_atomic
from recipes.corpus.manifest import MANIFEST_NAME, Record, write_manifest

VAL_SHARE = 0.02


def _val_or_train(key: str) -> str:
    """Deterministic ~2% validation split from a hash of the utterance id."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "val" if bucket < VAL_SHARE else "train"


def _place(wav: Path, out: Path, speaker: str, uid: str, convert: bool) -> tuple[str, float, int]:
    """(path relative to out, duration, sample rate) of the wav the record should point at."""
    if convert:
        audio, rate = read_wav(wav)
        target = out / "wavs" / speaker / f"{uid}.wav"
        audio = resample(audio, rate)
        write_wav_atomic(target, audio)
        return target.relative_to(out).as_posix(), round(len(audio) / SAMPLE_RATE, 3), SAMPLE_RATE
    info = sf.info(str(wav))
    return (
        Path(os.path.relpath(wav, out)).as_posix(),
        round(info.frames / info.samplerate, 3),
        info.samplerate,
    )


def read_ljspeech(root: Path, out: Path, speaker: str = "ljspeech", convert: bool = False) -> Iterator[Record]:
    meta = root / "metadata.csv"
    if not meta.exists():
        raise FileNotFoundError(f"{meta} not found: ROOT must hold metadata.csv and wavs/")
    for number, line in enumerate(meta.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 2:
            raise ValueError(f"{meta}:{number}: expected 'id|text|normalized', got {line!r}")
        uid, text = parts[0], parts[1]
        normalized = parts[2] if len(parts) > 2 and parts[2] else text
        wav = root / "wavs" / f"{uid}.wav"
        if not wav.exists():
            raise FileNotFoundError(f"{wav} listed in {meta}:{number} is missing")
        path, duration, rate = _place(wav, out, speaker, uid, convert)
        yield Record(
            id=f"{speaker}-{uid}",
            path=path,
            text=text,
            lang="en",
            speaker=speaker,
            emotion="neutral",
            duration_s=duration,
            split=_val_or_train(uid),
            spoken=normalized,
            base_teacher="real:ljspeech",
            category="read",
            sample_rate=rate,
        )


def _aishell_split_dirs(root: Path) -> list[tuple[Path, str]]:
    if (root / "content.txt").exists():
        return [(root, "val" if root.name == "test" else "train")]
    dirs = [(root / name, split) for name, split in (("train", "train"), ("test", "val"))]
    found = [(d, s) for d, s in dirs if (d / "content.txt").exists()]
    if not found:
        raise FileNotFoundError(f"no content.txt under {root} or {root}/train, {root}/test")
    return found


def read_aishell3(root: Path, out: Path, convert: bool = False) -> Iterator[Record]:
    """AISHELL-3's test speakers are disjoint from its train speakers, so test becomes our 'val' split."""
    for folder, split in _aishell_split_dirs(root):
        content = folder / "content.txt"
        for number, line in enumerate(content.read_text(encoding="utf-8").splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            name, tokens = fields[0], fields[1:]
            if not name.endswith(".wav") or len(tokens) % 2:
                raise ValueError(f"{content}:{number}: expected 'FILE.wav char pinyin char pinyin ...'")
            spk = name[:7]  # SSB0005 from SSB00050001.wav
            uid = name[:-4]
            chars, pinyin = tokens[0::2], tokens[1::2]
            wav = folder / "wav" / spk / name
            if not wav.exists():
                raise FileNotFoundError(f"{wav} listed in {content}:{number} is missing")
            speaker = f"aishell3_{spk}"
            path, duration, rate = _place(wav, out, speaker, uid, convert)
            text = "".join(chars)
            yield Record(
                id=f"aishell3-{uid}",
                path=path,
                text=text,
                lang="zh",
                speaker=speaker,
                emotion="neutral",
                duration_s=duration,
                split=split,
                spoken=text,
                base_teacher="real:aishell3",
                category="read",
                phones=[" ".join(pinyin)],
                sample_rate=rate,
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", choices=("ljspeech", "aishell3"))
    p.add_argument("root", type=Path)
    p.add_argument("--out", type=Path, required=True, help="folder for manifest.jsonl (and wavs/ with --convert)")
    p.add_argument("--convert", action="store_true", help="write 24 kHz 16-bit copies instead of pointing at ROOT")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    root = args.root.resolve()
    records = list(
        read_ljspeech(root, out, convert=args.convert)
        if args.dataset == "ljspeech"
        else read_aishell3(root, out, convert=args.convert)
    )
    write_manifest(out / MANIFEST_NAME, records)
    hours = sum(r.duration_s for r in records) / 3600
    print(
        f"{len(records)} utterances, {hours:.2f} h, {len({r.speaker for r in records})} speakers -> "
        f"{out / MANIFEST_NAME}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
