#!/usr/bin/env bash
# Build .gpu/site-http.tar.xz: the HTTP server's third-party packages that the GPU machine's image lacks (FastAPI,
# Starlette, pydantic, uvicorn with httptools/uvloop, python-multipart, redis), for its CPython 3.12 on manylinux
# x86_64, at the versions installed in .venv. Unpacked there beside site-serve (make_site_serve.sh):
#   tar xJf .gpu/site-http.tar.xz -C /tmp && export PYTHONPATH=$PWD/src:/tmp/site-serve:/tmp/site-http
# Used by h200_http_serving.sh. Usage: bash benchmarks/probes/make_site_http.sh [OUTPUT]   (needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP=${PIP:-$PWD/.venv/bin/pip}
OUTPUT=${1:-.gpu/site-http.tar.xz}
NAMES=(fastapi starlette pydantic pydantic-core annotated-types typing-inspection anyio sniffio idna uvicorn h11
  httptools uvloop python-multipart redis annotated-doc opentelemetry-api)
pins=()
for name in "${NAMES[@]}"; do
  v=$("$PIP" show "$name" 2>/dev/null | awk '/^Version:/ {print $2}')
  [ -n "$v" ] || { echo "make_site_http: $name is not installed in the venv ($PIP)" >&2; exit 1; }
  pins+=("$name==$v")
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/wheels" "$WORK/site-http"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
"$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  "${platforms[@]}" -d "$WORK/wheels" "${pins[@]}"
for whl in "$WORK"/wheels/*.whl; do
  unzip -q -o "$whl" -d "$WORK/site-http"
done
find "$WORK/site-http" -depth \( -name __pycache__ -o -name tests \) -type d -exec rm -rf {} +
bad=$(find "$WORK/site-http" -name '*.cpython-*.so' ! -name '*.cpython-312-x86_64-linux-gnu.so' | head -1)
[ -z "$bad" ] || { echo "make_site_http: wrong Python ABI: $bad" >&2; exit 1; }
mkdir -p "$(dirname "$OUTPUT")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00:00Z' -C "$WORK" -cf - site-http \
  | xz -9 -T1 >"$OUTPUT.tmp"
mv "$OUTPUT.tmp" "$OUTPUT"
echo "$OUTPUT: $(stat -c %s "$OUTPUT") bytes; wheels: $(cd "$WORK/wheels" && ls | tr '\n' ' ')"
