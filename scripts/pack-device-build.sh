#!/usr/bin/env bash
# Copies what scripts/device-check.sh needs from a Release build folder into a small folder that
# can travel to a GPU machine (the `fusejit` command, libfusejit, the GPU test executables,
# bench_launch and the warmed kernel cache), without the object files.
#   usage: scripts/pack-device-build.sh [BUILD_DIR] [DEST]   (defaults: build .device-carry/build)
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
if [ -d "$build/test-cache" ]; then cp -r "$build/test-cache" "$dest/test-cache"; fi
strip --strip-unneeded "$dest/cli/fusejit" "$dest"/tests/* "$dest"/bench/* "$dest"/lib/libfusejit.so.* 2>/dev/null || true
du -sh "$dest"
