# Sourced by recipes/train/rebuild_t*.sh after `cd` to the repository root, with WORK as $1 (default /work):
# sets W (work folder), EVAL (sentence sets the corpus builder keeps out of its text) and CV (the teachers'
# venv), makes both venvs if missing, and defines build NAME HOURS SEED MIX [EXTRA...] (one resumable corpus
# build under $W/NAME; EXTRA goes to recipes.corpus.build as is).
W=${1:-/work}
EVAL=${EVAL_DIR:-$W/shared/eval}
CV=$W/corpus-venv

test -x "$CV/bin/python" || bash recipes/corpus/setup.sh "$CV"
test -x .venv/bin/python || make .venv/.installed
build() {
  local name=$1 hours=$2 seed=$3 mix=$4
  shift 4
  "$CV/bin/python" -m recipes.corpus.build --out "$W/$name" --hours "$hours" --seed "$seed" --text-mix "$mix" \
    --jobs 2 --eval-dir "$EVAL" "$@"
}
