#!/usr/bin/env bash
# Cut a packed training set into device uploads (.gpu/U1..U<n>: acoustic shards in parts under PART_MIB, each with
# pack.json) and an init part after them (.gpu/U<n+1>/init/acoustic: the shipped model's acoustic and emotion
# weights beside the aligner of run T12c, placed at STEP of the schedule by recipes.train.compose_init), plus an
# empty .gpu/none for calls that carry nothing. Used by rebuild_t12.sh and rebuild_t15.sh.
#
#   bash recipes/train/cut_uploads.sh PACKED STEP [PART_MIB]
set -euo pipefail
cd "$(dirname "$0")/../.."
packed=$1 step=$2
part_bytes=$((${3:-60} * 1024 * 1024))
rm -rf .gpu/U[0-9]* .gpu/none
mkdir -p .gpu/none .gpu/U1
part=1 size=0
for shard in "$packed"/acoustic-*.npz.xz; do
  bytes=$(stat -c %s "$shard")
  if ((size > 0 && size + bytes > part_bytes)); then
    part=$((part + 1)) size=0
    mkdir -p ".gpu/U$part"
  fi
  cp "$shard" ".gpu/U$part/"
  size=$((size + bytes))
done
for ((k = 1; k <= part; k++)); do cp "$packed/pack.json" ".gpu/U$k/"; done
init=".gpu/U$((part + 1))/init/acoustic"
.venv/bin/python -m recipes.train.compose_init --model models/rtvox-small --aligner recipes/train/aligner-t12c \
  --step "$step" --out "$init"
cp "$packed/pack.json" ".gpu/U$((part + 1))/"
du -sh .gpu/U*
