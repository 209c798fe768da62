#!/usr/bin/env bash
# Issue 5 over HTTP on the GPU machine: `rtvox serve` with its defaults (the device picks workers, batches, the
# captured pipeline), then benchmarks/load_bench.py --url against it once /ready answers 200. Carry
# .gpu/site-serve.tar.xz (make_site_serve.sh) and .gpu/site-http.tar.xz (make_site_http.sh). Results go to $OUT:
# http_load<TAG>.json, http_serve<TAG>.log, http_load<TAG>.log.
#   OUT=... bash benchmarks/probes/h200_http_serving.sh
# env: LEVELS (1,1000), LEVEL_S (10), SAT (saturation clients, 256), CLIENTS (client processes, 4), BASELINE (50),
#   BENCH_T (seconds for the bench, 270), READY_T (seconds to wait for /ready, 150), PORT (8123), TAG, SERVE_ARGS.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rtvox-out}
PORT=${PORT:-8123}
TAG=${TAG:-}
mkdir -p "$OUT"
[ -d /tmp/site-serve ] || tar xJf .gpu/site-serve.tar.xz -C /tmp
[ -d /tmp/site-http ] || tar xJf .gpu/site-http.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site-serve:/tmp/site-http:${PYTHONPATH:-}
t0=$(date +%s)
# shellcheck disable=SC2086
python3 -m rtvox serve --device cuda --port "$PORT" --max-queue 4096 ${SERVE_ARGS:-} >"$OUT/http_serve$TAG.log" 2>&1 &
server=$!
ready=0
for _ in $(seq 1 "${READY_T:-150}"); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/ready', timeout=2)" 2>/dev/null; then
    ready=1; break
  fi
  kill -0 $server 2>/dev/null || break
  sleep 1
done
echo "server ready=$ready after $(($(date +%s) - t0)) s"
if [ "$ready" = 1 ]; then
  timeout "${BENCH_T:-270}" python3 benchmarks/load_bench.py --url "http://127.0.0.1:$PORT" --natural-durations \
    --levels "${LEVELS:-1,1000}" --level-seconds "${LEVEL_S:-10}" --ttfa-p99-ms 150 \
    --baseline-requests "${BASELINE:-50}" --saturation-clients "${SAT:-256}" --client-processes "${CLIENTS:-4}" \
    >"$OUT/http_load$TAG.json" 2>"$OUT/http_load$TAG.log"
  echo "http load bench rc=$?"
  tail -c 2500 "$OUT/http_load$TAG.log"
else
  tail -40 "$OUT/http_serve$TAG.log"
fi
kill $server 2>/dev/null
wait $server 2>/dev/null
grep -v -i warning "$OUT/http_serve$TAG.log" | tail -5
