#!/usr/bin/env bash
# Builds fusejit with clang, AddressSanitizer and UndefinedBehaviorSanitizer (-fno-sanitize-recover:
# the first report fails; -O1 -g1) and libFuzzer's coverage instrumentation in BUILD_DIR (default
# build-asan/), then runs the whole suite there with ctest. One build serves three checks of CI:
# the sanitized suite, the clang build of the library and the command, and the fuzz target that
# scripts/fuzz.sh runs (it reuses this folder).
#   usage: scripts/sanitize.sh [BUILD_DIR] [ctest args...]
# Environment:
#   FUSEJIT_SANITIZE_KERNELS=0  the CPU path's kernels (compiled by the host compiler at run time and
#                               dlopen'ed) are built without sanitizers; default 1: with the same flags
#                               (cmake/sanitize.cmake). With 0, FUSEJIT_TEST_CACHE=DIR can point at a
#                               plain build's test-cache, whose modules the sanitized tests then load.
#   FUSEJIT_TEST_CACHE=DIR      the tests' kernel cache (default BUILD_DIR/test-cache).
#   FUSEJIT_SANITIZE_TARGETS    build only these targets and run no test (scripts/fuzz.sh).
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
shift || true
kernels=${FUSEJIT_SANITIZE_KERNELS:-1}
[ "$kernels" = 1 ] && kernels=ON || kernels=OFF
case "$build" in /*) cache=${FUSEJIT_TEST_CACHE:-$build/test-cache} ;; *) cache=${FUSEJIT_TEST_CACHE:-$PWD/$build/test-cache} ;; esac
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 -g1 (line tables only): what the ASan and libFuzzer documentation recommend for usable reports
# (-O1 keeps frames), at a fraction of the compile time of -O2 -g (docs/testing.md). fmt compiled,
# not header-only: a third less compile time per file (CMakeLists.txt, FUSEJIT_FMT_HEADER_ONLY).
# No Python package and no benchmarks: the extension would need the ASan runtime preloaded into python.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DFUSEJIT_SANITIZE=address,undefined -DFUSEJIT_BUILD_FUZZ=ON \
  -DFUSEJIT_SANITIZE_KERNELS="$kernels" -DFUSEJIT_TEST_CACHE_DIR="$cache" \
  -DFUSEJIT_BUILD_BENCH=OFF -DFUSEJIT_BUILD_PYTHON=OFF -DFUSEJIT_FMT_HEADER_ONLY=OFF >/dev/null
if [ -n "${FUSEJIT_SANITIZE_TARGETS:-}" ]; then
  read -r -a targets <<< "$FUSEJIT_SANITIZE_TARGETS"
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
  exit 0
fi
cmake --build "$build" -j"$(nproc)"
scripts/check-no-libcuda.sh "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# LeakSanitizer's stop-the-world tracer itself crashes now and then at exit ("Tracer caught signal
# 11", after every test case passed; google/sanitizers#1353, seen once in CI on test_cache). When
# that signature is in the output of a failed run, the failed tests run once more and must pass; a
# real leak, sanitizer report or failure repeats and still fails.
log="$build/ctest-sanitized.log"
rc=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log" || rc=$?
if [ "$rc" != 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "$log"; then
  echo "== sanitize: LeakSanitizer's tracer crashed (not a leak report); running the failed tests once more"
  ctest --test-dir "$build" --output-on-failure --rerun-failed
  exit $?
fi
exit "$rc"
