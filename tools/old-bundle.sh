#!/usr/bin/env bash
# Is a figure's drift the code or the machine? Builds a slim GPU-host bundle of an earlier commit, to carry beside
# dist/gpu-host so one device call times both commits on the same card. The slim copy drops what a timing A/B does not
# need (the Node runtime, which it borrows from dist/gpu-host on the host; gpu-tests, esbuild, exploits, examples), so
# the two bundles fit the carry limit together.
#   tools/old-bundle.sh COMMIT            -> dist/gpu-host-<short commit>/   (carry: ["dist/gpu-host", that folder])
# On the host, after any dist/gpu-host/run call has unpacked Node there:
#   ln -sf "$PWD/dist/gpu-host/node" dist/gpu-host-<c>/node
# then the old commit's own bench entry, e.g. OUT=$W/old dist/gpu-host-a8a2310/bench/h200-kernels.sh (before the
# suites moved to bench/run) or dist/gpu-host-<c>/bench/run kernels --out $W/old (after).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: tools/old-bundle.sh COMMIT" >&2; exit 2; }
short="$(git rev-parse --short "$1^{commit}")" || { echo "old-bundle: '$1' is not a commit here" >&2; exit 2; }
repo="$PWD"
tree="/tmp/fk-old-$short"
[ -d "$tree" ] || git worktree add -f --detach "$tree" "$short" >/dev/null
echo "old-bundle: building $short in $tree (npm ci, build, gpu-host; a few minutes)"
(cd "$tree" && npm ci --no-audit --no-fund >/dev/null && NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false npm run -s gpu-host >/dev/null)
out="$repo/dist/gpu-host-$short"
rm -rf "$out"
mkdir -p "$out"
for f in "$tree/dist/gpu-host/"* "$tree/dist/gpu-host/".[!.]*; do
  [ -e "$f" ] || continue
  case "$(basename "$f")" in node.xz | node | esbuild | gpu-tests | exploits | examples | bench-work | results) ;; *) cp -a "$f" "$out/" ;; esac
done
echo "old-bundle: $out ($(du -sh "$out" | cut -f1)); on the host: ln -sf \"\$PWD/dist/gpu-host/node\" dist/gpu-host-$short/node"
