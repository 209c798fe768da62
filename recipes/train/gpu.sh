#!/usr/bin/env bash
# Train the default model on the GPU machine in calls of under 10 minutes (see recipes/train/README.md).
#
#   recipes/train/gpu.sh upload DIR            copy carried shards from DIR into $DATA (a warm machine keeps them)
#   recipes/train/gpu.sh train DIR MINUTES     copy DIR's shards too, then train acoustic + vocoder side by side
#                                              for MINUTES, resuming from $RUNS when a previous call left state
#                                              there, else from snapshots in DIR/init if present; the snapshots
#                                              and logs go to $OUT as 15 MiB pieces of one tar (snap.tar.*).
#   VOCODER=0 recipes/train/gpu.sh train ...   acoustic model only (keep an already trained vocoder)
#   CODEC=1 recipes/train/gpu.sh train ...     also train the AR family's mel codec side by side (from
#                                              DIR/init/codec on a cold machine); it comes back in the same tar
#   SECOND=mini recipes/train/gpu.sh train ... also train a second acoustic model of that preset side by side
#                                              (run dir acoustic-mini, init from DIR/init/acoustic-mini)
#   ACOUSTIC_PRESET=mini VOC_PRESET=vocos-mini recipes/train/gpu.sh train ...   the presets (default small and
#                                              vocos-small; an init snapshot must be of the same preset)
#   recipes/train/gpu.sh train-ar DIR MINUTES  the AR family: codec for CODEC_MINUTES (default 3; skipped when
#                                              DIR/init/codec holds a trained one), then the GPT for the rest
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA:-/tmp/rtvox-data}
RUNS=${RUNS:-/tmp/rtvox-runs}
OUT=${OUT:-/tmp/rtvox-out}
mode=$1
src=$2
PACK=${PACK:-/tmp/pack}
mkdir -p "$DATA" "$RUNS" "$OUT"
cp -v "$src"/*.npz* "$src"/pack.json "$DATA"/ 2>/dev/null || true
ls -la "$DATA"
[ "$mode" = upload ] && exit 0

minutes=$3
ship() {  # $PACK -> $OUT as 15 MiB pieces of one tar (each returned file must stay under 16 MiB, 64 MiB in all):
  # the vocoder's discriminator stays behind (a warm machine resumes from $RUNS; a cold one restarts it)
  tar cf - --exclude=discriminator.safetensors -C "$(dirname "$PACK")" "$(basename "$PACK")" \
    | split -b 15M - "$OUT/snap.tar."
  ls -la "$OUT"
}
if [ "$mode" = train-ar ]; then
  export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:${PYTHONPATH:-}
  codec_snap="$src/init/codec"
  if [ ! -f "$codec_snap/progress.json" ]; then
    cm=${CODEC_MINUTES:-3}
    python3 -m rtvox train codec --data "$DATA" --run-dir "$RUNS/codec" --minutes "$cm" --device "${DEVICE:-cuda}" >"$RUNS/codec.log" 2>&1 \
      || echo "codec exited with $?"
    codec_snap="$RUNS/codec/snapshot"
    minutes=$(python3 -c "print(max(0.5, $minutes - $cm - 0.3))")
  fi
  ainit=()
  if [ ! -f "$RUNS/ar/state.pt" ] && [ -d "$src/init/ar" ]; then ainit=(--init "$src/init/ar"); fi
  python3 -m rtvox train ar --data "$DATA" --run-dir "$RUNS/ar" --codec "$codec_snap" --minutes "$minutes" \
    --preset "${AR_PRESET:-medium}" --device "${DEVICE:-cuda}" "${ainit[@]}" >"$RUNS/ar.log" 2>&1 || echo "ar exited with $?"
  tail -n 3 "$RUNS"/codec.log "$RUNS"/ar.log 2>/dev/null || true
  mkdir -p "$PACK"/codec "$PACK"/ar
  cp "$codec_snap"/* "$PACK"/codec/ 2>/dev/null || true
  cp "$RUNS"/ar/snapshot/* "$PACK"/ar/ 2>/dev/null || true
  cp "$RUNS"/codec.log "$RUNS"/ar.log "$PACK"/ 2>/dev/null || true
  ship
  exit 0
fi
# soundfile (Opus decoding for the vocoder's data) is not in the GPU image: carried as wheels in .whl/
if [ "${VOCODER:-1}" != 0 ] && ! python3 -c "import soundfile" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || true
ainit=() vinit=()
if [ ! -f "$RUNS/acoustic/state.pt" ] && [ -d "$src/init/acoustic" ]; then ainit=(--init "$src/init/acoustic"); fi
if [ ! -f "$RUNS/vocoder/state.pt" ] && [ -d "$src/init/vocoder" ]; then vinit=(--init "$src/init/vocoder"); fi
python3 -m rtvox train acoustic --data "$DATA" --run-dir "$RUNS/acoustic" --minutes "$minutes" \
  --preset "${ACOUSTIC_PRESET:-small}" --batch-frames "${BATCH_FRAMES:-24000}" --device "${DEVICE:-cuda}" "${ainit[@]}" >"$RUNS/acoustic.log" 2>&1 &
apid=$!
vpid=
if [ "${VOCODER:-1}" != 0 ]; then
  python3 -m rtvox train vocoder --data "$DATA" --run-dir "$RUNS/vocoder" --minutes "$minutes" \
    --preset "${VOC_PRESET:-vocos-small}" --batch "${VOC_BATCH:-32}" --device "${DEVICE:-cuda}" "${vinit[@]}" >"$RUNS/vocoder.log" 2>&1 &
  vpid=$!
fi
spid=
if [ -n "${SECOND:-}" ]; then
  sinit=()
  if [ ! -f "$RUNS/acoustic-$SECOND/state.pt" ] && [ -d "$src/init/acoustic-$SECOND" ]; then
    sinit=(--init "$src/init/acoustic-$SECOND")
  fi
  python3 -m rtvox train acoustic --data "$DATA" --run-dir "$RUNS/acoustic-$SECOND" --minutes "$minutes" \
    --preset "$SECOND" --batch-frames "${BATCH_FRAMES:-24000}" --device "${DEVICE:-cuda}" "${sinit[@]}" \
    >"$RUNS/acoustic-$SECOND.log" 2>&1 &
  spid=$!
fi
cpid=
if [ "${CODEC:-0}" != 0 ]; then
  cinit=()
  if [ ! -f "$RUNS/codec/state.pt" ] && [ -d "$src/init/codec" ]; then cinit=(--init "$src/init/codec"); fi
  python3 -m rtvox train codec --data "$DATA" --run-dir "$RUNS/codec" --minutes "$minutes" --device "${DEVICE:-cuda}" "${cinit[@]}" \
    >"$RUNS/codec.log" 2>&1 &
  cpid=$!
fi
( while kill -0 $apid 2>/dev/null; do sleep 60; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader || true; tail -n 1 "$RUNS/acoustic.log"; tail -n 1 "$RUNS/vocoder.log"; done ) &
wait $apid || echo "acoustic exited with $?"
[ -z "$vpid" ] || wait $vpid || echo "vocoder exited with $?"
[ -z "$cpid" ] || wait $cpid || echo "codec exited with $?"
[ -z "$spid" ] || wait $spid || echo "acoustic-$SECOND exited with $?"
tail -n 3 "$RUNS"/*.log
mkdir -p "$PACK"/acoustic "$PACK"/vocoder
cp "$RUNS"/acoustic/snapshot/* "$PACK"/acoustic/ 2>/dev/null || true
cp "$RUNS"/vocoder/snapshot/* "$PACK"/vocoder/ 2>/dev/null || true
if [ -n "$spid" ]; then
  mkdir -p "$PACK/acoustic-$SECOND"
  cp "$RUNS/acoustic-$SECOND"/snapshot/* "$PACK/acoustic-$SECOND"/ 2>/dev/null || true
  cp "$RUNS/acoustic-$SECOND"/log.jsonl "$PACK/acoustic-$SECOND-log.jsonl" 2>/dev/null || true
fi
if [ -n "$cpid" ]; then mkdir -p "$PACK"/codec; cp "$RUNS"/codec/snapshot/* "$PACK"/codec/ 2>/dev/null || true; fi
cp "$RUNS"/*.log "$RUNS"/acoustic/log.jsonl "$PACK"/ 2>/dev/null || true
cp "$RUNS"/vocoder/log.jsonl "$PACK"/vocoder-log.jsonl 2>/dev/null || true
ship
