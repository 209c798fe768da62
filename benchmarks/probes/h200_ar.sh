#!/usr/bin/env bash
# Issue 7 on the H200: the AR GPU tests (fused Triton decode kernels compiled, graphed decode), then the decode
# benchmark (benchmarks/ar_decode.py) for the medium, base and large presets: eager vs graph vs fused-graph, the
# fused GEMV tile sweep at batch 1, and the whole engine. Results go to $OUT. Carry .gpu/site-serve.tar.xz.
#   OUT=... bash benchmarks/probes/h200_ar.sh
# env: PRESETS (default medium,large,base), TILES (fused tile sweep), SKIP_TESTS=1
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rtvox-out}
mkdir -p "$OUT" && tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site-serve:${PYTHONPATH:-}
TILES=${TILES:-16x256x4,8x256x4,16x512x4,32x128x4,8x512x8,16x128x4,4x512x4}
[ "${SKIP_TESTS:-0}" = 1 ] || timeout 240 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_ar_serving_gpu.py 2>&1 | tail -15
IFS=, read -ra presets <<< "${PRESETS:-medium,large,base}"
for preset in "${presets[@]}"; do
  engine=()
  [ "$preset" = medium ] && engine=(--engine-streams 256,16,1 --engine-tokens 150 --engine-variants graph,fused-graph)
  timeout 200 python3 benchmarks/ar_decode.py --preset "$preset" --dtype bfloat16 --batches 1,16 --prompt 66 \
    --steps 50 --profile --variants eager,graph,fused-graph --fused-tiles "$TILES" "${engine[@]}" \
    > "$OUT/ar_decode_h200_$preset.json" 2> "$OUT/ar_decode_h200_$preset.log"
  echo "$preset rc=$?"; grep -v Warning "$OUT/ar_decode_h200_$preset.log" | cut -c1-400 | tail -40
done
