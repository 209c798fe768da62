#!/usr/bin/env bash
# Issue 5 on the H200: the graphs-backend step probe, then the serving load benchmark (listener levels and a
# closed-loop saturation phase). Frontend wheels (pypinyin, jieba trimmed, cn2an, espeakng-loader en only,
# soundfile, soxr, pyloudnorm) come as .gpu/site-serve.tar.xz (carry it). Results go to $OUT.
#   OUT=... bash benchmarks/probes/h200_serving.sh [LEVELS] [LEVEL_SECONDS]
# env: PROBE=0 skips the step probe; KERNELS (probe variants), PROBE_REPEATS, MAX_BATCH, DEPTH (batches in
# flight), SATURATION (closed-loop clients),
# PROCS (service processes on the device, as `rtvox serve --workers`), FRONTENDS (frontend processes of each),
# SRC (the rtvox source tree to import: an A/B against another commit's src/), ENGINE_PROCESS=1 (the engines in their own process), GIL_MS (GIL switch interval while serving, 0 = Python's 5 ms), BUCKET_EDGES (scheduler length buckets), PROBE_TIMEOUT / LOAD_TIMEOUT (seconds), TAG (suffix of the result files)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rtvox-out}
LEVELS=${1:-1,250,500,1000,1500,2000}
SECONDS_PER_LEVEL=${2:-15}
mkdir -p "$OUT" && tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=${SRC:-$PWD/src}:/tmp/site-serve:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
[ "${PROBE:-1}" = 1 ] && timeout "${PROBE_TIMEOUT:-240}" python3 benchmarks/probes/gpu_serving_probe.py "$OUT" --model models/rtvox-small --kernels "${KERNELS:-none,dynamic}" ${PROBE_REPEATS:+--repeats "$PROBE_REPEATS"} 2>&1 | grep -v Warning | tail -20
timeout "${LOAD_TIMEOUT:-330}" python3 benchmarks/load_bench.py --model models/rtvox-small --device cuda --backend graphs \
  --natural-durations --levels "$LEVELS" --first-chunk-wait-ms 0 --level-seconds "$SECONDS_PER_LEVEL" --max-batch "${MAX_BATCH:-32}" --max-wait-ms 10 \
  ${BUCKET_EDGES:+--bucket-edges "$BUCKET_EDGES"} --frontend-processes "${FRONTENDS:-8}" --service-processes "${PROCS:-1}" --batches-in-flight "${DEPTH:-1}" --gil-switch-ms "${GIL_MS:-0.5}" ${ENGINE_PROCESS:+--engine-process} --saturation-clients "${SATURATION:-512}" --baseline-requests 50 \
  > "$OUT/load_h200_graphs${TAG:-}.json" 2> "$OUT/load_h200_graphs${TAG:-}.log"
echo "load bench rc=$?"; tail -c 3000 "$OUT/load_h200_graphs${TAG:-}.log"
