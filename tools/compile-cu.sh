#!/usr/bin/env bash
# Compile every .cu in the repo for sm_90a so a kernel that does not compile never lands.
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
for f in "${files[@]}"; do
  if "$NVCC" -std=c++17 -arch=sm_90a -c "$f" -o "$out/$(basename "$f").o" ${NVCC_FLAGS:-}; then
    echo "compile-cu: ok   $f"
  else
    echo "compile-cu: FAIL $f" >&2; fail=1
  fi
  # kernels with programmatic-dependent-launch code (fk_pdl.cuh) also build with it compiled in (-DFK_PDL=1)
  if grep -q '#include "fk_pdl.cuh"' "$f"; then
    if "$NVCC" -std=c++17 -arch=sm_90a -DFK_PDL=1 -c "$f" -o "$out/$(basename "$f").pdl.o" ${NVCC_FLAGS:-}; then
      echo "compile-cu: ok   $f (FK_PDL=1)"
    else
      echo "compile-cu: FAIL $f (FK_PDL=1)" >&2; fail=1
    fi
  fi
  # paths compiled in only under other macros: the file lists them, a line each: `// compile-cu: -DNAME=V ...`
  while IFS= read -r flags; do
    [ -n "$flags" ] || continue
    # shellcheck disable=SC2086  # the flags are words
    if "$NVCC" -std=c++17 -arch=sm_90a $flags -c "$f" -o "$out/$(basename "$f").variant.o" ${NVCC_FLAGS:-}; then
      echo "compile-cu: ok   $f ($flags)"
    else
      echo "compile-cu: FAIL $f ($flags)" >&2; fail=1
    fi
  done < <(sed -n 's#^// compile-cu: *##p' "$f")
done
exit $fail
