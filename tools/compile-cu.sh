#!/usr/bin/env bash
# Compile every .cu in the repo for sm_90a so a kernel that does not compile never lands. The -gencode form builds
# sm_90a alone (on nvcc 13.0 the -arch=sm_90a shorthand also runs a plain sm_90 pass, which rejects wgmma).
# Kernels are also compiled at run time by NVRTC; this is the same source through nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
if ! command -v "$NVCC" >/dev/null; then
  echo "compile-cu: nvcc not found (set NVCC or put the CUDA toolkit's bin on PATH)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cu'; git ls-files --others --exclude-standard '*.cu')
if [ ${#files[@]} -eq 0 ]; then echo "compile-cu: no .cu files"; exit 0; fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
fail=0
# build FILE OUT LABEL [FLAG ...]: one nvcc build, reported as ok or FAIL (LABEL in parentheses when given)
build() {
  local f=$1 o=$2 label=$3; shift 3
  if "$NVCC" -std=c++17 -gencode=arch=compute_90a,code=sm_90a "$@" -c "$f" -o "$out/$o" ${NVCC_FLAGS:-}; then
    echo "compile-cu: ok   $f${label:+ ($label)}"
  else
    echo "compile-cu: FAIL $f${label:+ ($label)}" >&2; fail=1
  fi
}
for f in "${files[@]}"; do
  base=$(basename "$f")
  # a deliberately broken file (a demo of a compile error) says `// compile-cu: expect-error`: it must FAIL to build
  if grep -q '^// compile-cu: expect-error' "$f"; then
    if "$NVCC" -std=c++17 -gencode=arch=compute_90a,code=sm_90a -c "$f" -o "$out/$base.o" ${NVCC_FLAGS:-} >/dev/null 2>&1; then
      echo "compile-cu: FAIL $f (declares expect-error, but it compiles)" >&2; fail=1
    else
      echo "compile-cu: ok   $f (fails to compile, as it declares)"
    fi
    continue
  fi
  build "$f" "$base.o" ""
  # kernels with programmatic-dependent-launch code (fk_pdl.cuh) also build with it compiled in (-DFK_PDL=1)
  if grep -q '#include "fk_pdl.cuh"' "$f"; then build "$f" "$base.pdl.o" "FK_PDL=1" -DFK_PDL=1; fi
  # paths compiled in only under other macros: the file lists them, a line each: `// compile-cu: -DNAME=V ...`
  while IFS= read -r flags; do
    [ -n "$flags" ] || continue
    # shellcheck disable=SC2086  # the flags are words
    build "$f" "$base.variant.o" "$flags" $flags
  done < <(sed -n 's#^// compile-cu: *##p' "$f")
done
exit $fail
