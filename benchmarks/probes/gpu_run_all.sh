#!/usr/bin/env bash
# One device call for issues 4 and 5 on the shipped default: the fast-path probe against eager fp32 (latency, log-mel
# L1) and the memory probe, the GPU tests, then the HTTP serving load (h200_http_serving.sh). Carry
# .gpu/site-serve.tar.xz and .gpu/site-http.tar.xz. Everything lands in $OUT (8 files; PACK=1 adds all.tgz of them).
#   OUT=$OUT bash benchmarks/probes/gpu_run_all.sh
# env: SKIP_PROBE=1, SKIP_TESTS=1, SKIP_HTTP=1 leave a part out; REPEATS (30); TESTS (the GPU test files); the
# HTTP script's own env (LEVELS, SAT, CLIENTS, BENCH_T, ...).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rtvox-out}
mkdir -p "$OUT"
[ -d /tmp/site-serve ] || tar xJf .gpu/site-serve.tar.xz -C /tmp
[ -d /tmp/site-http ] || tar xJf .gpu/site-http.tar.xz -C /tmp  # the serving tests start the HTTP app too
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:1 PYTHONPATH=$PWD/src:/tmp/site-serve:/tmp/site-http:${PYTHONPATH:-}
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  python3 -c 'import json; print("model", json.load(open("models/rtvox-small/config.json"))["version"])'
  nproc
} >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ "${SKIP_PROBE:-0}" != 1 ]; then
  timeout 200 python3 benchmarks/probes/gpu_pipeline_probe.py "$OUT" --model models/rtvox-small --repeats "${REPEATS:-30}" \
    --variants eager-fp32,pipeline-default --budget-s 0 >"$OUT/probe.log" 2>&1
  echo "pipeline probe rc=$?"; grep -v -i warning "$OUT/probe.log" | tail -8
  timeout 90 python3 benchmarks/probes/gpu_memory_probe.py "$OUT" --model models/rtvox-small >>"$OUT/probe.log" 2>&1
  echo "memory probe rc=$?"; grep -v -i warning "$OUT/probe.log" | tail -4
fi
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 150 python3 -m pytest -q -W ignore -p no:cacheprovider ${TESTS:-tests/gpu/test_serving_gpu.py tests/gpu/test_ar_serving_gpu.py} \
    >"$OUT/serving_tests.log" 2>&1
  echo "gpu tests rc=$?"; tail -3 "$OUT/serving_tests.log"
fi
[ "${SKIP_HTTP:-0}" != 1 ] && OUT=$OUT bash benchmarks/probes/h200_http_serving.sh
# the device tool brings back at most 8 files: PACK=1 packs them into one all.tgz when more were written
if [ "${PACK:-0}" = 1 ]; then tar czf /tmp/all.tgz -C "$OUT" --exclude=all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"; fi
ls -la "$OUT"
