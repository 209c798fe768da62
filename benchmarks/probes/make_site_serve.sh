#!/usr/bin/env bash
# Rebuild .gpu/site-serve.tar.xz: the rtvox runtime's third-party packages that the GPU machine's image lacks,
# for its Python 3.12 (CPython, manylinux x86_64, no internet there). Unpacked there with
#   tar xJf .gpu/site-serve.tar.xz -C /tmp && export PYTHONPATH=$PWD/src:/tmp/site-serve
# (see h200_serving.sh, h200_whisper_parity.sh), carried as ".gpu/site-serve.tar.xz" (.gpu/ is gitignored).
#
# What the runtime imports (grep of src/rtvox: text frontend, audio encode/decode, runtime/engines) and where it
# comes from on the GPU machine:
#   in this tarball: pypinyin, jieba (dictionary cut only: dict.txt + finalseg), cn2an + proces,
#     espeakng-loader (libespeak-ng + the English data only), soundfile (+ its libsndfile, cffi, pycparser),
#     soxr, pyloudnorm
#   already in the image: torch, numpy, safetensors, scipy (pyloudnorm), typer, tqdm, triton, onnx, onnxruntime,
#     onnxscript, prometheus-client, typing-extensions, colorama, charset-normalizer, setuptools (jieba's
#     pkg_resources, optional)
#   not carried, not needed by the probes: av (lazy import in rtvox.audio: mp3/opus/aac only; FLAC/WAV go through
#     soundfile), fastapi/starlette/pydantic/uvicorn/python-multipart (HTTP server), redis (redis voice cache),
#     onnxslim (export-time only), tensorrt (tensorrt backend), faster-whisper/zhconv (eval), piper/matplotlib
#     (bench), numba (training)
# Versions are the ones installed in .venv (pip show), so the GPU run uses the same frontend as here.
# Usage: bash benchmarks/probes/make_site_serve.sh [OUTPUT]   (default .gpu/site-serve.tar.xz; needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PIP=${PIP:-$ROOT/.venv/bin/pip}
OUTPUT=${1:-.gpu/site-serve.tar.xz}
MAX_BYTES=$((12 * 1024 * 1024))

WHEELS=(pypinyin cn2an proces espeakng-loader soundfile cffi pycparser soxr pyloudnorm)
SDISTS=(jieba)  # sdist only on PyPI, pure Python

TAG=make_site_serve
# shellcheck source=benchmarks/probes/site_common.sh
. benchmarks/probes/site_common.sh
mapfile -t pins < <(pins "${WHEELS[@]}" "${SDISTS[@]}")
((${#pins[@]} == ${#WHEELS[@]} + ${#SDISTS[@]})) || exit 1
echo "pins: ${pins[*]}"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SITE=$WORK/site-serve
mkdir -p "$WORK/wheels" "$WORK/sdists" "$SITE"

unpack_wheels "$WORK/wheels" "$SITE" "${pins[@]:0:${#WHEELS[@]}}"

# sdist-only packages: unpack and copy the package folder.
for pin in "${pins[@]:${#WHEELS[@]}}"; do
  name=${pin%%==*}
  "$PIP" download -q --no-deps --no-binary=:all: --no-build-isolation -d "$WORK/sdists" "$pin"
done
for sd in "$WORK"/sdists/*.tar.gz; do
  tar xzf "$sd" -C "$WORK/sdists"
done
cp -r "$WORK"/sdists/jieba-*/jieba "$SITE/"

# Trim. jieba: rtvox uses jieba.Tokenizer().cut(HMM=False) only; the package imports finalseg at import time.
rm -rf "$SITE"/jieba/{analyse,posseg,lac_small}
# espeak-ng data: rtvox reads English only (voice en-us). Keep the phoneme tables, intonations, en_dict, the
# English language files (lang/gmw/en*) and the voice variants (voices/!v, small); drop every other language.
DATA=$SITE/espeakng_loader/espeak-ng-data
find "$DATA" -maxdepth 1 -name '*_dict' ! -name en_dict -delete
find "$DATA/lang" -mindepth 1 -maxdepth 1 ! -name gmw -exec rm -rf {} +
find "$DATA/lang/gmw" -mindepth 1 ! -name 'en*' -delete
find "$DATA/voices" -mindepth 1 -maxdepth 1 ! -name '!v' -exec rm -rf {} +
for f in phontab phonindex phondata intonations en_dict lang/gmw/en lang/gmw/en-US; do
  [ -e "$DATA/$f" ] || { echo "make_site_serve: espeak-ng data lacks $f" >&2; exit 1; }
done
# The three copies of libespeak-ng (a wheel holds no links) become one file and two links to it.
for f in "$SITE"/espeakng_loader/libespeak-ng.so.*; do
  cmp -s "$f" "$SITE/espeakng_loader/libespeak-ng.so" && ln -sf libespeak-ng.so "$f"
done
# Clutter: the cn2an wheel's stray top-level build/, example/ and src/ (old build trees, demo, PNGs), byte code,
# tests, type stubs, pyinstaller hooks, console scripts.
rm -rf "$SITE"/{build,example,src,bin}
find "$SITE" -depth \( -name __pycache__ -o -name tests -o -name test -o -name __pyinstaller \) -type d -exec rm -rf {} +
find "$SITE" \( -name '*.pyc' -o -name '*.pyi' -o -name '*_test.py' \) -type f -delete

check_abi "$SITE"
pack "$WORK" site-serve "$OUTPUT"

size=$(stat -c %s "$OUTPUT")
echo "wheels: $(cd "$WORK/wheels" && ls | tr '\n' ' ')"
echo "binary modules:"
find "$SITE" -name '*.so*' \( -type f -o -type l \) -printf '  %P %l\n' | sort
echo "$OUTPUT: $size bytes ($(du -sh "$SITE" | cut -f1) unpacked)"
echo "top-level entries of site-serve/:"
tar tJf "$OUTPUT" | awk -F/ 'NF > 1 && $2 != "" {print $2}' | sort -u | sed 's/^/  /'
if [ "$size" -ge "$MAX_BYTES" ]; then
  echo "make_site_serve: $OUTPUT is over 12 MiB" >&2
  exit 1
fi
