"""Zero-shot cloning: speaker similarity of the output to a reference clip of a voice the model never trained on.

References come from two places: the teacher corpus's `heldout-teacher` speakers (flite rms and its transforms,
left out of training), assembled into 5-15 s clips from their neutral utterances, and a folder of extra clips
(`--clone-refs`, e.g. the new voices of recipes/eval_teachers.py). For each reference the model speaks held-out
sentences with `speaker_profile(clip)` (its embedding, and its timbre where the model matches it); the GE2E
embedding of every output is compared with the reference's (cosine) and with every built-in voice's: a trial passes
when the reference is the closest.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import soundfile as sf

from rtvox.audio.loudness import trim_silence
from rtvox.constants import SAMPLE_RATE

if TYPE_CHECKING:
    from rtvox.runtime.synthesizer import Synthesizer

HELDOUT_SPEAKERS = ("en_f_rms_01", "en_m_rms", "en_m_rms_01")
CLIP_MIN_S, CLIP_TARGET_S, CLIP_MAX_S = 5.0, 10.0, 15.0
GAP_S = 0.3
REFERENCE_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm")


@dataclass(frozen=True)
class Reference:
    """A reference clip of a voice outside the training data."""

    name: str
    audio: np.ndarray  # float32 mono at SAMPLE_RATE, 5-15 s
    source: str  # where it came from (corpus ids or a file)

    def wav_bytes(self) -> bytes:
        buffer = io.BytesIO()
        sf.write(buffer, self.audio, SAMPLE_RATE, format="WAV", subtype="PCM_16")
        return buffer.getvalue()


def _read(path: Path) -> np.ndarray:
    """Any audio file rtvox decodes (channels averaged) as float32 mono at SAMPLE_RATE."""
    from rtvox.audio.decode import load_audio

    return load_audio(path, SAMPLE_RATE, param="reference clip")


def corpus_references(corpus: Path, speakers: tuple[str, ...] = HELDOUT_SPEAKERS) -> list[Reference]:
    """One ~10 s clip per speaker: its first neutral English utterances (manifest order), trimmed and joined."""
    manifest = corpus / "manifest.jsonl"
    if not manifest.is_file():
        return []
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line]
    refs = []
    for speaker in speakers:
        chosen = [r for r in rows if r["speaker"] == speaker and r["emotion"] == "neutral" and r["lang"] == "en"]
        pieces: list[np.ndarray] = []
        ids: list[str] = []
        total = 0.0
        for row in chosen:
            clip = trim_silence(_read(corpus / row["path"]), SAMPLE_RATE)
            if total + clip.shape[0] / SAMPLE_RATE > CLIP_MAX_S:
                continue
            pieces += [clip, np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
            ids.append(row["id"])
            total += clip.shape[0] / SAMPLE_RATE + GAP_S
            if total >= CLIP_TARGET_S:
                break
        if total >= CLIP_MIN_S:
            refs.append(Reference(speaker, np.concatenate(pieces[:-1]), "corpus:" + ",".join(ids)))
    return refs


def folder_references(folder: Path, skipped: list[dict[str, str]] | None = None) -> list[Reference]:
    """Every audio file of a folder (REFERENCE_SUFFIXES: wav, flac, mp3, ogg, opus, m4a, aac, webm; any sample
    rate, channels averaged), silence trimmed and cut to CLIP_MAX_S. Clips that do not decode or hold under
    CLIP_MIN_S of speech are left out; each is appended to `skipped` with the reason."""
    from rtvox.errors import AudioInputError

    refs = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in REFERENCE_SUFFIXES):
        try:
            audio = trim_silence(_read(path), SAMPLE_RATE)[: int(CLIP_MAX_S * SAMPLE_RATE)]
        except AudioInputError as exc:
            if skipped is not None:
                skipped.append({"file": str(path), "reason": str(exc)})
            continue
        if audio.shape[0] < CLIP_MIN_S * SAMPLE_RATE:
            if skipped is not None:
                seconds = audio.shape[0] / SAMPLE_RATE
                skipped.append({"file": str(path), "reason": f"{seconds:.1f} s of speech, under {CLIP_MIN_S:g} s"})
            continue
        refs.append(Reference(path.stem, audio, f"file:{path.name}"))
    return refs


def gather_references(corpus: Path | None, folders: list[Path]) -> tuple[list[Reference], list[dict[str, str]]]:
    """The cloning test's references: the corpus's held-out speakers, then every folder's clips; and the clips
    left out, with reasons. Raises InputError for a path that is not a folder or when nothing usable is found."""
    from rtvox.errors import InputError

    sources = [(folder, "--clone-refs") for folder in folders]
    for path, flag in [(corpus, "--corpus"), *sources] if corpus is not None else sources:
        if not path.is_dir():
            raise InputError(f"{flag} {path} is not a folder", param=flag.lstrip("-"))
    refs = corpus_references(corpus) if corpus is not None else []
    skipped: list[dict[str, str]] = []
    for folder in folders:
        refs += folder_references(folder, skipped)
    if not refs:
        where = ", ".join(str(p) for p in [*([corpus] if corpus is not None else []), *folders])
        reasons = "; ".join(f"{Path(i['file']).name}: {i['reason']}" for i in skipped[:5])
        raise InputError(
            f"--clone found no usable reference clip in {where}: it needs audio files ("
            + ", ".join(x.lstrip(".") for x in REFERENCE_SUFFIXES[:4])
            + f", ...) with at least {CLIP_MIN_S:g} s of speech, or a corpus with held-out speakers"
            + (f" (left out: {reasons})" if reasons else ""),
            param="clone_refs",
        )
    return refs, skipped


def evaluate_cloning(synth: Synthesizer, references: list[Reference], sentences: list[str]) -> dict[str, Any]:
    """Cosine to the reference and the closer-than-any-built-in share, per reference and over all trials."""
    builtin_names = synth.voices.builtin_names
    builtins = np.stack([synth.voices.get(name).embedding for name in builtin_names])  # [V, 256]
    per_ref = []
    cosines: list[float] = []
    wins: list[bool] = []
    for ref in references:
        profile = synth.speaker_profile(ref.wav_bytes())  # the embedding and, where the model matches it, timbre
        ref_emb = profile["speaker_embedding"]
        trials = []
        for text in sentences:
            result = synth.synthesize(text, **profile)
            # Outputs are single sentences, often under the 3 s a user's clip must have: embed them directly.
            speech = trim_silence(result.audio, SAMPLE_RATE)
            out_emb = synth.speaker_encoder.embed_reference(speech if speech.size else result.audio, SAMPLE_RATE)
            cos_ref = float(np.dot(out_emb, ref_emb))
            cos_builtin = builtins @ out_emb
            nearest = int(np.argmax(cos_builtin))
            win = cos_ref > float(cos_builtin[nearest])
            cosines.append(cos_ref)
            wins.append(win)
            trials.append(
                {
                    "text": text,
                    "cosine_to_reference": round(cos_ref, 4),
                    "nearest_builtin": builtin_names[nearest],
                    "cosine_to_nearest_builtin": round(float(cos_builtin[nearest]), 4),
                    "closer_to_reference": win,
                }
            )
        per_ref.append(
            {
                "reference": ref.name,
                "source": ref.source,
                "reference_seconds": round(ref.audio.shape[0] / SAMPLE_RATE, 2),
                "reference_cosine_to_nearest_builtin": round(float(np.max(builtins @ ref_emb)), 4),
                "mean_cosine": round(float(np.mean([t["cosine_to_reference"] for t in trials])), 4),
                "trials": trials,
            }
        )
    return {
        "references": len(references),
        "trials": len(cosines),
        "mean_cosine": round(float(np.mean(cosines)), 4) if cosines else None,
        "min_cosine": round(float(np.min(cosines)), 4) if cosines else None,
        "closer_to_reference_share": round(float(np.mean(wins)), 4) if wins else None,
        "per_reference": per_ref,
    }


def teacher_similarity(corpus: Path, builtins: dict[str, np.ndarray], per_speaker: int = 6) -> dict[str, Any]:
    """The ceiling of the cloning test: a held-out speaker's *own* other utterances (neutral, zh and en, not in
    its reference clip) scored exactly as a model's outputs are, against the same reference clips."""
    from rtvox.audio.reference import prepare_reference
    from rtvox.constants import SPEAKER_SAMPLE_RATE
    from rtvox.models.speaker import SpeakerEncoder

    encoder = SpeakerEncoder.load()
    names = list(builtins)
    table = np.stack([builtins[n] for n in names]) if names else np.zeros((0, 1))
    rows = [json.loads(line) for line in (corpus / "manifest.jsonl").read_text(encoding="utf-8").splitlines() if line]
    cosines: list[float] = []
    wins: list[bool] = []
    per_ref = {}
    for ref in corpus_references(corpus):
        ref_emb = encoder.embed_utterance(prepare_reference(ref.wav_bytes(), sr=SPEAKER_SAMPLE_RATE))
        used = set(ref.source.removeprefix("corpus:").split(","))
        others = [r for r in rows if r["speaker"] == ref.name and r["emotion"] == "neutral" and r["id"] not in used]
        scores = []
        for row in others[:per_speaker]:
            emb = encoder.embed_reference(trim_silence(_read(corpus / row["path"]), SAMPLE_RATE), SAMPLE_RATE)
            cos = float(np.dot(emb, ref_emb))
            scores.append(cos)
            cosines.append(cos)
            if names:
                wins.append(cos > float(np.max(table @ emb)))
        per_ref[ref.name] = round(float(np.mean(scores)), 4) if scores else None
    return {
        "trials": len(cosines),
        "mean_cosine": round(float(np.mean(cosines)), 4) if cosines else None,
        "min_cosine": round(float(np.min(cosines)), 4) if cosines else None,
        "closer_to_reference_share": round(float(np.mean(wins)), 4) if wins else None,
        "builtins_from": names,
        "per_reference": per_ref,
    }
