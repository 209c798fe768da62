#!/usr/bin/env bash
# Build .gpu/site-http.tar.xz: the HTTP server's third-party packages that the GPU machine's image lacks (FastAPI
# and its annotated-doc and opentelemetry-api, Starlette, pydantic, uvicorn with httptools/uvloop,
# python-multipart, redis), for its CPython 3.12 on manylinux x86_64, at the versions installed in .venv. Unpacked
# there beside site-serve (make_site_serve.sh):
#   tar xJf .gpu/site-http.tar.xz -C /tmp && export PYTHONPATH=$PWD/src:/tmp/site-serve:/tmp/site-http
# Used by h200_http_serving.sh and gpu_run_all.sh. Usage: bash benchmarks/probes/make_site_http.sh [OUTPUT]   (needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP=${PIP:-$PWD/.venv/bin/pip}
OUTPUT=${1:-.gpu/site-http.tar.xz}
NAMES=(fastapi annotated-doc opentelemetry-api starlette pydantic pydantic-core annotated-types typing-inspection
  anyio sniffio idna uvicorn h11 httptools uvloop python-multipart redis)
TAG=make_site_http
# shellcheck source=benchmarks/probes/site_common.sh
. benchmarks/probes/site_common.sh
mapfile -t pinned < <(pins "${NAMES[@]}")
((${#pinned[@]} == ${#NAMES[@]})) || exit 1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/wheels" "$WORK/site-http"
unpack_wheels "$WORK/wheels" "$WORK/site-http" "${pinned[@]}"
find "$WORK/site-http" -depth \( -name __pycache__ -o -name tests \) -type d -exec rm -rf {} +
check_abi "$WORK/site-http"
pack "$WORK" site-http "$OUTPUT"
echo "$OUTPUT: $(stat -c %s "$OUTPUT") bytes; wheels: $(cd "$WORK/wheels" && ls | tr '\n' ' ')"
