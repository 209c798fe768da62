#!/usr/bin/env bash
# Train the default model on the GPU machine in calls of under 10 minutes (see recipes/train/README.md).
#
#   recipes/train/gpu.sh upload DIR            copy carried shards (and DIR/init snapshots) into $DATA (a warm
#                                              machine keeps them)
#   recipes/train/gpu.sh train DIR MINUTES     copy DIR's shards too, then train acoustic + vocoder side by side
#                                              for MINUTES, resuming from $RUNS when a previous call left state
#                                              there, else from snapshots in DIR/init if present; the snapshots
#                                              and logs go to $OUT as 15 MiB pieces of one tar (snap.tar.*).
#   VOCODER=0 recipes/train/gpu.sh train ...   acoustic model only (keep an already trained vocoder)
#   ACOUSTIC=0 VOC_ARGS="--gta-fraction 0.5 --lr 2e-4" recipes/train/gpu.sh train ...   the vocoder alone (from
#                                              DIR/init/vocoder), e.g. fine-tuned on gta-*.npz (recipes/train/gta.py);
#                                              VOC2_ARGS / VOC3_ARGS="..." train more variants beside it (run
#                                              dirs vocoder-b, vocoder-c)
#   CODEC=1 recipes/train/gpu.sh train ...     also train the AR family's mel codec side by side (from
#                                              DIR/init/codec on a cold machine); it comes back in the same tar
#   SECOND=mini recipes/train/gpu.sh train ... also train a second acoustic model of that preset side by side
#                                              (run dir acoustic-mini, init from DIR/init/acoustic-mini)
#   ACOUSTIC_PRESET=mini VOC_PRESET=vocos-mini recipes/train/gpu.sh train ...   the presets (default small and
#                                              vocos-small; an init snapshot must be of the same preset)
#   ACOUSTIC_ARGS="--dropout 0.1" recipes/train/gpu.sh train ...   extra flags for `rtvox train acoustic`
#   recipes/train/gpu.sh train-ar DIR MINUTES  the AR family: codec for CODEC_MINUTES (default 3; skipped when
#                                              DIR/init/codec holds a trained one), then the GPT for the rest;
#                                              CODEC_PRESET, CODEC_ARGS and AR_ARGS pass more flags, and a
#                                              durations.npz in DIR (recipes/train/durations.py) goes to both
#                                              as --durations (phoneme-pointer presets)
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
if [ -d "$src/init" ]; then mkdir -p "$DATA/init" && cp -r "$src"/init/* "$DATA/init/"; fi  # init snapshots may come by upload too
ls -la "$DATA"
[ "$mode" = upload ] && exit 0

minutes=$3
ship() {  # $PACK -> $OUT as 15 MiB pieces of one tar (each returned file must stay under 16 MiB, 64 MiB in all):
  # the vocoder's discriminator stays behind (a warm machine resumes from $RUNS; a cold one restarts it)
  tar cf - --exclude=discriminator.safetensors -C "$(dirname "$PACK")" "$(basename "$PACK")" \
    | split -b "${PIECE:-15M}" - "$OUT/snap.tar."
  ls -la "$OUT"
}
if [ "$mode" = train-ar ]; then
  export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:${PYTHONPATH:-}
  codec_snap="$src/init/codec"
  dur=()
  if [ -f "$DATA/durations.npz" ]; then dur=(--durations "$DATA/durations.npz"); fi
  if [ ! -f "$codec_snap/progress.json" ] && [ -f "$RUNS/codec/snapshot/progress.json" ] && [ -n "${CODEC_DONE:-}" ]; then
    codec_snap="$RUNS/codec/snapshot"  # an earlier call on this warm machine trained it
  elif [ ! -f "$codec_snap/progress.json" ]; then
    cm=${CODEC_MINUTES:-3}
    # shellcheck disable=SC2086  # CODEC_ARGS is a list of extra flags, split on purpose
    python3 -m rtvox train codec --data "$DATA" --run-dir "$RUNS/codec" --minutes "$cm" --device "${DEVICE:-cuda}" \
      --preset "${CODEC_PRESET:-base}" "${dur[@]}" ${CODEC_ARGS:-} >"$RUNS/codec.log" 2>&1 || echo "codec exited with $?"
    codec_snap="$RUNS/codec/snapshot"
    if [ -f "$RUNS/codec/best/progress.json" ]; then codec_snap="$RUNS/codec/best"; fi  # lowest held-out mel L1
    minutes=$(python3 -c "print(max(0.5, $minutes - $cm - 0.3))")
  fi
  ainit=()
  if [ ! -f "$RUNS/ar/state.pt" ] && [ -d "$src/init/ar" ]; then ainit=(--init "$src/init/ar"); fi
  # shellcheck disable=SC2086
  python3 -m rtvox train ar --data "$DATA" --run-dir "$RUNS/ar" --codec "$codec_snap" --minutes "$minutes" \
    --preset "${AR_PRESET:-medium}" --device "${DEVICE:-cuda}" "${dur[@]}" ${AR_ARGS:-} "${ainit[@]}" \
    >>"$RUNS/ar.log" 2>&1 || echo "ar exited with $?"
  tail -n 3 "$RUNS"/codec.log "$RUNS"/ar.log 2>/dev/null || true
  mkdir -p "$PACK"/codec "$PACK"/ar
  cp "$codec_snap"/* "$PACK"/codec/ 2>/dev/null || true
  ar_snap="$RUNS/ar/snapshot"
  if [ -f "$RUNS/ar/best/progress.json" ]; then ar_snap="$RUNS/ar/best"; fi  # lowest held-out cross-entropy
  cp "$ar_snap"/* "$PACK"/ar/ 2>/dev/null || true
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
declare -A pids=()
launch() {  # launch NAME TRAINER ARGS...: `rtvox train TRAINER` in $RUNS/NAME, in the background; it resumes from
  # $RUNS/NAME/state.pt when an earlier call on this machine left one, else starts from $src/init/NAME (or an
  # uploaded $DATA/init/NAME) if present
  local name=$1 trainer=$2
  shift 2
  local init=()
  if [ ! -f "$RUNS/$name/state.pt" ] && [ -d "$DATA/init/$name" ]; then init=(--init "$DATA/init/$name"); fi
  python3 -m rtvox train "$trainer" --data "$DATA" --run-dir "$RUNS/$name" --minutes "$minutes" \
    --device "${DEVICE:-cuda}" "$@" "${init[@]}" >"$RUNS/$name.log" 2>&1 &
  pids[$name]=$!
}
# shellcheck disable=SC2086  # ACOUSTIC_ARGS and VOC_ARGS are lists of extra flags, split on purpose
if [ "${ACOUSTIC:-1}" != 0 ]; then
  launch acoustic acoustic --preset "${ACOUSTIC_PRESET:-small}" --batch-frames "${BATCH_FRAMES:-24000}" ${ACOUSTIC_ARGS:-}
fi
if [ "${VOCODER:-1}" != 0 ]; then
  # shellcheck disable=SC2086
  launch vocoder vocoder --preset "${VOC_PRESET:-vocos-small}" --batch "${VOC_BATCH:-32}" ${VOC_ARGS:-}
fi
for v in 2 3; do  # more vocoder variants side by side (run dirs vocoder-b, vocoder-c; the same init)
  args_var="VOC${v}_ARGS"
  [ -n "${!args_var:-}" ] || continue
  name=vocoder-$([ "$v" = 2 ] && echo b || echo c)
  if [ -d "$DATA/init/vocoder" ] && [ ! -d "$DATA/init/$name" ]; then cp -r "$DATA/init/vocoder" "$DATA/init/$name"; fi
  # shellcheck disable=SC2086
  launch "$name" vocoder --preset "${VOC_PRESET:-vocos-small}" --batch "${VOC_BATCH:-32}" ${!args_var}
done
if [ -n "${SECOND:-}" ]; then
  launch "acoustic-$SECOND" acoustic --preset "$SECOND" --batch-frames "${BATCH_FRAMES:-24000}"
fi
if [ "${CODEC:-0}" != 0 ]; then launch codec codec; fi
apid=${pids[acoustic]:-${pids[vocoder]}}
( while kill -0 "$apid" 2>/dev/null; do
    sleep 60
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader || true
    for name in "${!pids[@]}"; do tail -n 1 "$RUNS/$name.log"; done
  done ) &
for name in "${!pids[@]}"; do wait "${pids[$name]}" || echo "$name exited with $?"; done
tail -n 3 "$RUNS"/*.log
for name in "${!pids[@]}"; do
  mkdir -p "$PACK/$name"
  cp "$RUNS/$name"/snapshot/* "$PACK/$name"/ 2>/dev/null || true
  cp "$RUNS/$name"/log.jsonl "$PACK/$name-log.jsonl" 2>/dev/null || true
done
cp "$RUNS"/*.log "$PACK"/ 2>/dev/null || true
ship
