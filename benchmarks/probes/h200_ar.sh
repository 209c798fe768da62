#!/usr/bin/env bash
# Issue 7 on the H200: the AR GPU tests (fused Triton decode kernels compiled, graphed decode), then the decode
# benchmark (benchmarks/ar_decode.py) for the medium, base and large presets: eager vs graph vs fused-graph, the
# fused GEMV tile sweep at batch 1, and the whole engine. Results go to $OUT. Carry .gpu/site-serve.tar.xz.
#   OUT=... bash benchmarks/probes/h200_ar.sh
# env: PRESETS (default medium,large,base), VARIANTS, TILES (fused tile sweep), SKIP_TESTS=1
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rtvox-out}
mkdir -p "$OUT" && tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site-serve:${PYTHONPATH:-}
TILES=${TILES:-8x1024x8,4x1024x4,4x1024x8,16x1024x8,8x512x8,8x2048x8,16x512x4}
[ "${SKIP_TESTS:-0}" = 1 ] || timeout 240 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/gpu/test_ar_serving_gpu.py 2>&1 | grep -v Warning | tail -40
IFS=, read -ra presets <<< "${PRESETS:-medium,large,base}"
for preset in "${presets[@]}"; do
  engine=()
  [ "$preset" = medium ] && engine=(--engine-streams 256,16,1 --engine-tokens 150 --engine-variants graph,fused-graph)
  timeout 200 python3 benchmarks/ar_decode.py --preset "$preset" --dtype bfloat16 --batches 1,16 --prompt 66 \
    --steps 50 --profile --variants ${VARIANTS:-eager,graph,fused-graph,fused-graph-nopdl} --fused-tiles "$TILES" "${engine[@]}" \
    > "$OUT/ar_decode_h200_$preset.json" 2> "$OUT/ar_decode_h200_$preset.log"
  echo "$preset rc=$?"; grep -iE "error|fail" "$OUT/ar_decode_h200_$preset.log" | cut -c1-300 | tail -5
  python3 - "$OUT/ar_decode_h200_$preset.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for v, rows in d["results"].items():
    for r in rows:
        print(d["preset"], v, r["batch"], "wall", r["step_ms_p50"], "device", r.get("device_step_ms"),
              "x floor", r.get("device_x_over_weight_floor", {}).get("issue"), "diff", r["max_abs_logit_diff_vs_first_variant"],
              "replays equal", r.get("replays_identical"))
for k, v in d.get("fused_tiles", {}).items():
    print("tile", k, v)
for v, rows in d.get("engine", {}).items():
    for r in rows:
        print("engine", v, r)
print("errors", d["errors"])
PY
done
