# Shared by make_site_serve.sh and make_site_http.sh (sourced): packages for the GPU machine's CPython 3.12 on
# manylinux x86_64, at the versions installed in .venv. Expects PIP (the venv's pip) and TAG (message prefix).

# pins NAME...: prints NAME==VERSION for each, as installed in the venv; fails naming the first that is not.
pins() {
  local name v
  for name in "$@"; do
    v=$("$PIP" show "$name" 2>/dev/null | awk '/^Version:/ {print $2}')
    [ -n "$v" ] || { echo "$TAG: $name is not installed in the venv ($PIP)" >&2; return 1; }
    echo "$name==$v"
  done
}

# unpack_wheels WHEELDIR SITE PIN...: downloads the cp312 manylinux wheels (no dependencies) and unzips them into SITE.
unpack_wheels() {
  local wheels=$1 site=$2 p whl
  shift 2
  local platforms=()
  # pip matches each manylinux_2_N exactly, so name the ones in use
  for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
    manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
  done
  "$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    "${platforms[@]}" -d "$wheels" "$@"
  for whl in "$wheels"/*.whl; do
    unzip -q -o "$whl" -d "$site"
  done
}

# check_abi SITE: every binary module is built for CPython 3.12 (or the stable ABI).
check_abi() {
  local bad=0 so
  while IFS= read -r so; do
    case $so in
      *.cpython-312-x86_64-linux-gnu.so | *.abi3.so) ;;
      *.cpython-*.so) echo "$TAG: wrong Python ABI: ${so#"$1"/}" >&2; bad=1 ;;
    esac
  done < <(find "$1" -name '*.so*' -type f)
  return "$bad"
}

# pack WORK NAME OUTPUT: WORK/NAME as a reproducible tar.xz (sorted names, fixed owner and mtime) at OUTPUT.
pack() {
  mkdir -p "$(dirname "$3")"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00:00Z' -C "$1" -cf - "$2" \
    | xz -9e -T1 >"$3.tmp"
  mv "$3.tmp" "$3"
}
