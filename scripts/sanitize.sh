#!/usr/bin/env bash
# Builds the whole suite with AddressSanitizer and UndefinedBehaviorSanitizer (GCC,
# -fno-sanitize-recover: the first report fails its test; -O1 -g1) in BUILD_DIR (default build-asan/) and
# runs it with ctest. The CPU path's kernels, compiled at run time by the host compiler and
# dlopen'ed, get the same flags ($CXX set by tests/CMakeLists.txt, see cmake/sanitize.cmake).
#   usage: scripts/sanitize.sh [BUILD_DIR] [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
shift || true
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 -g1 (line tables only): what the ASan documentation recommends for usable reports (-O1 keeps
# frames), at a fraction of the compile time of RelWithDebInfo's -O2 -g (docs/testing.md).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "${launcher[@]}" \
  -DFUSEJIT_SANITIZE=address,undefined -DFUSEJIT_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
scripts/check-no-libcuda.sh "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
FUSEJIT_CACHE_DIR="$PWD/$build/ci-cache" ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
