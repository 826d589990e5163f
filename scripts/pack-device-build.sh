#!/usr/bin/env bash
# Copies what scripts/device-check.sh needs from a Release build folder into a small folder that
# can travel to a GPU machine (the `fusejit` command, libfusejit, the GPU test executables,
# bench_launch and the warmed kernel cache's entries for the GPU's architecture: not its CPU
# modules, which ctest leaves there by the hundred and which would not fit a 64 MiB carry), without
# the object files.
#   usage: scripts/pack-device-build.sh [BUILD_DIR] [DEST]   (defaults: build .device-carry/build)
#   FUSEJIT_PACK_ARCH: the architecture whose kernels travel (default 90: sm_90 and compute_90)
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dest=${2:-.device-carry/build}
rm -rf "$dest"
mkdir -p "$dest/cli" "$dest/lib" "$dest/tests" "$dest/bench"
cp "$build/cli/fusejit" "$dest/cli/"
if [ -x "$build/bench/bench_launch" ]; then cp "$build/bench/bench_launch" "$dest/bench/"; fi
cp -P "$build"/lib/libfusejit.so* "$dest/lib/"
for t in "$build"/tests/test_gpu_*; do
  [ -x "$t" ] && cp "$t" "$dest/tests/"
done
if [ -d "$build/test-cache" ]; then
  arch=${FUSEJIT_PACK_ARCH:-90}
  mkdir -p "$dest/test-cache"
  chmod 700 "$dest/test-cache"  # fusejit uses only a private cache folder
  # `cache list`: key, bytes, target, names; an entry lives at DIR/<first two hex digits>/<key>.fjk.
  FUSEJIT_CACHE_DIR="$build/test-cache" "$build/cli/fusejit" cache list |
    awk -v a="$arch" '$3 == "sm_" a || $3 == "compute_" a {print $1}' |
    while read -r key; do
      mkdir -p -m 700 "$dest/test-cache/${key:0:2}"
      cp "$build/test-cache/${key:0:2}/$key.fjk" "$dest/test-cache/${key:0:2}/"
    done
fi
strip --strip-unneeded "$dest/cli/fusejit" "$dest"/tests/* "$dest"/bench/* "$dest"/lib/libfusejit.so.* 2>/dev/null || true
du -sh "$dest"
