#!/usr/bin/env bash
# Rebuild run T12's training data on a fresh CPU machine and cut it into device uploads (recipes/train/README.md,
# run T12). Every step resumes: a corpus build skips what it already wrote, a finished pack (pack.json) is kept.
# About 90 min on two idle cores (builds ~75 min, pack ~14 min; measured 2026-12-04/05: 2 h 5 min on cores shared
# with other work); run it in the background first thing. Parts come out at ~52 MB (5 shards) + a 39 MB init part.
#
#   bash recipes/train/rebuild_t12.sh [WORK]     corpora and packed-v6 under WORK (default /work)
#
# Then, device calls back to back (models/rtvox-small moved out of the tree for them, 64 MiB carried per call):
#   bash recipes/train/gpu.sh upload .gpu/U1 ... (one call per .gpu/U<k>, carry [".gpu/U<k>"]; the last part is
#   init/acoustic = the shipped model's acoustic and emotion weights beside the aligner of run T12c, committed in
#   recipes/train/aligner-t12c, at T11's last step: recipes.train.compose_init), then the training calls of
#   recipes/train/README.md (carry [".gpu/none"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=recipes/train/rebuild_env.sh
source recipes/train/rebuild_env.sh "${1:-/work}"  # W, EVAL, CV, both venvs, build()
build corpus-v3b 4.5 4 v3
build corpus-v2b 1.5 5 v2
build corpus-v2c 1 6 v2
build corpus-v4a 4 7 v4
build corpus-v5a 4 8 v5
# the cloning test's reference voices (7 s; T12 is scored against 8.1.0 on them)
[ -f "$W/eval-voices/voices.json" ] || "$CV/bin/python" -m recipes.eval_teachers voices --out "$W/eval-voices"
if [ ! -f "$W/packed-v6/pack.json" ]; then
  .venv/bin/python -m recipes.train.pack "$W/corpus-v3b" "$W/corpus-v2b" "$W/corpus-v2c" "$W/corpus-v4a" \
    "$W/corpus-v5a" "$W/packed-v6" --shards 15 --jobs 2 --vocoder-minutes 0.2
fi

bash recipes/train/cut_uploads.sh "$W/packed-v6" 25291 60
