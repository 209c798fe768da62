#!/usr/bin/env bash
# Issue 4 on the H200: "Whisper WER/CER of a GPU engine within 0.5 points of eager's". The GPU machine has no
# Whisper (and no internet to fetch it), so this renders the en and zh eval sentences through each backend and
# voice there (benchmarks/probes/gpu_render_sets.py) and brings the clips back; they are scored here, on the CPU
# machine, where faster-whisper is installed:
#   for t in /work/.device/.../*.tar; do tar xf "$t" -C /tmp/parity; done    # files_at of the run's reply
#   cd /tmp/parity && rtvox eval --audio-dir eager-mei --sets en,zh    # and graphs-mei, eager-joe, graphs-joe
# then compare each graphs-<voice> WER/CER with eager-<voice>'s.
#
# Two modes:
#   bash benchmarks/probes/h200_whisper_parity.sh prepare   (here, on the CPU machine, before the run)
#       copies /work/shared/eval/sentences_{en,zh}.txt to .gpu/sets/{en,zh}.txt (the device machine sees only the
#       repo, and ../shared does not travel) and builds .gpu/site-serve.tar.xz with make_site_serve.sh if missing.
#   OUT=... bash benchmarks/probes/h200_whisper_parity.sh   (on the GPU machine, through the device tool's run)
#       carry: [".gpu/site-serve.tar.xz", ".gpu/sets"]   (the working tree, ~56 MB with models/, plus ~4.5 MB:
#       under the 64 MiB that travels; `prepare` prints the total)
# env for the run: BACKENDS (eager,graphs), VOICES (mei,joe), SETS (en=.gpu/sets/en.txt,zh=.gpu/sets/zh.txt),
#   MODEL (models/rtvox-small), RENDER_TIMEOUT (seconds, 540: the tool stops a command at 600), RATE (sample rate
#   of the clips, 24000; 16000 — Whisper's own — brings back two thirds of the bytes, for larger sets).
#
# Files returned (the tool brings back at most 8 files of $OUT, 16 MiB each, 64 MiB together): one
# <backend>-<voice>.tar per pair (a folder <backend>-<voice>/ of <set>-NNN.flac, PCM_16 at 24 kHz, and
# manifest.jsonl {set, text, path}), plus render.log. gpu_render_sets.py also leaves the unpacked folders in
# $OUT; this script deletes them after the tars are written, otherwise their ~160 FLACs would crowd the tars
# out of the 8 returned files. Size: 20 en sentences (~200 words) + 20 zh (~270 characters) are about 140 s of
# speech a voice, ~6.7 MB as raw 16-bit PCM, so each tar is ~4-5 MB as FLAC (under 7 MB even uncompressed):
# 2 backends x 2 voices = 4 tars, ~20 MB in all, within 8 files / 16 MiB each / 64 MiB. If a tar ever comes
# out over 16 MiB (longer sets, more voices) the script says so; split the call, e.g. one run per voice
# (VOICES=mei, then VOICES=joe) or one per set (SETS=en=.gpu/sets/en.txt, then SETS=zh=.gpu/sets/zh.txt: the
# tar names repeat, so keep each run's files apart before merging the manifests).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = prepare ]; then
  mkdir -p .gpu/sets
  for s in en zh; do
    cp "/work/shared/eval/sentences_$s.txt" ".gpu/sets/$s.txt"
  done
  # The larger English set for a 0.5-point bound: the dev sentences, then benchmarks/sets/parity_en.txt (ours).
  cat .gpu/sets/en.txt benchmarks/sets/parity_en.txt >.gpu/sets/en_parity.txt
  [ -f .gpu/site-serve.tar.xz ] || bash benchmarks/probes/make_site_serve.sh
  wc -l .gpu/sets/*.txt
  ls -l .gpu/site-serve.tar.xz
  tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
  carry=$(du -cb .gpu/site-serve.tar.xz .gpu/sets | tail -1 | cut -f1)
  echo "travels: $((tree + carry)) bytes (working tree $tree + carry $carry; the limit is $((64 * 1024 * 1024)))"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [prepare]" >&2; exit 2; }

OUT=${OUT:-/tmp/rtvox-out}
BACKENDS=${BACKENDS:-eager,graphs}
VOICES=${VOICES:-mei,joe}
SETS=${SETS:-en=.gpu/sets/en.txt,zh=.gpu/sets/zh.txt}
MODEL=${MODEL:-models/rtvox-small}
MAX_FILE=$((16 * 1024 * 1024))

mkdir -p "$OUT" && tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site-serve:${PYTHONPATH:-}
nvidia-smi
rc=0
timeout "${RENDER_TIMEOUT:-540}" python3 benchmarks/probes/gpu_render_sets.py "$OUT" --model "$MODEL" \
  --backends "$BACKENDS" --voices "$VOICES" --sets "$SETS" --sample-rate "${RATE:-24000}" 2>&1 | tee "$OUT/render.log" || rc=$?
echo "gpu_render_sets rc=$rc"
# Only the tars and the log come back: drop the unpacked folders (and a pair's folder left without its tar).
find "$OUT" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
ls -l "$OUT"
for t in "$OUT"/*.tar; do
  [ -e "$t" ] || continue
  echo "$(basename "$t"): $(tar tf "$t" | grep -c '\.flac$') clips"
  [ "$(stat -c %s "$t")" -lt "$MAX_FILE" ] || echo "WARNING: $(basename "$t") is over 16 MiB and will not come back; split the call (header)"
done
[ "$(find "$OUT" -maxdepth 1 -type f | wc -l)" -le 8 ] || echo "WARNING: more than 8 files in $OUT; only 8 come back"
exit "$rc"
