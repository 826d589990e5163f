#!/usr/bin/env bash
# Builds the libFuzzer target tests/fuzz/fuzz_graph with clang (ASan + UBSan, in build-fuzz/) and
# runs it for SECONDS (default 60) on the seed corpus (tests/fuzz/corpus, samples/graphs,
# tests/bad_graphs) with the dictionary tests/fuzz/graph.dict. New inputs go to a scratch folder,
# not the tree. Any crash, leak, timeout (10 s per input) or sanitizer report fails (exit != 0)
# and leaves the input in build-fuzz/findings/; add it to tests/fuzz/corpus/ once fixed, where
# the test suite replays it (fuzz_graph_corpus).
#   usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
build=${FUSEJIT_FUZZ_BUILD:-build-fuzz}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -g -O1, the flags libFuzzer's documentation uses: quicker to build than -O2 under ASan (the fuzz
# build is one of the slowest steps of CI on 2 cores) at some cost in executions per second.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  -DFUSEJIT_SANITIZE=address,undefined -DFUSEJIT_BUILD_FUZZ=ON -DFUSEJIT_BUILD_TESTS=OFF \
  -DFUSEJIT_BUILD_BENCH=OFF -DFUSEJIT_BUILD_CLI=ON >/dev/null
# The library and the command (the clang build of CI), and the fuzz target.
cmake --build "$build" -j"$(nproc)" --target fusejit fusejit_cli fuzz_graph
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
"$build/tests/fuzz/fuzz_graph" "$work" tests/fuzz/corpus samples/graphs tests/bad_graphs \
  -dict=tests/fuzz/graph.dict -max_total_time="$seconds" -timeout=10 -max_len=4096 -rss_limit_mb=2048 \
  -artifact_prefix="$build/findings/" -print_final_stats=1 "$@"
