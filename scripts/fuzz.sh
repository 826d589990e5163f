#!/usr/bin/env bash
# Builds the libFuzzer target tests/fuzz/fuzz_graph with clang (ASan + UBSan, in build-asan/, the
# folder of scripts/sanitize.sh; FUSEJIT_FUZZ_BUILD=DIR for another) and
# runs it for SECONDS (default 60) on the seed corpus (tests/fuzz/corpus, samples/graphs,
# tests/bad_graphs) with the dictionary tests/fuzz/graph.dict. New inputs go to a scratch folder,
# not the tree. Any crash, leak, timeout (10 s per input) or sanitizer report fails (exit != 0)
# and leaves the input in BUILD/findings/; add it to tests/fuzz/corpus/ once fixed, where
# the test suite replays it (fuzz_graph_corpus). With -jobs=N, each job's log (its final stats)
# is BUILD/fuzz-<job>.log. It runs in BUILD: give the extra flags' paths absolute.
#   usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
# libFuzzer reads "-max_total_time=abc" as 0: no limit at all.
case "$seconds" in ''|*[!0-9]*) n=0 ;; *) n=$((10#$seconds)) ;; esac  # "00" is 0 too
if [ "$n" -le 0 ]; then
  echo "fuzz.sh: SECONDS must be a whole number above 0, not '$seconds' (usage: scripts/fuzz.sh [SECONDS] [libFuzzer flags...])" >&2
  exit 2
fi
seconds=$n
build=${FUSEJIT_FUZZ_BUILD:-build-asan}
# The sanitized clang build of scripts/sanitize.sh (the same folder, so CI builds it once); here
# only the library, the command and the fuzz target.
FUSEJIT_SANITIZE_TARGETS="fusejit fusejit_cli fuzz_graph" scripts/sanitize.sh "$build"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# Run from BUILD: with -jobs=N libFuzzer writes fuzz-<job>.log (the final stats) in the current
# folder, which would be the source tree.
root=$PWD
build=$(cd "$build" && pwd)
cd "$build"
"$build/tests/fuzz/fuzz_graph" "$work" "$root/tests/fuzz/corpus" "$root/samples/graphs" "$root/tests/bad_graphs" \
  -dict="$root/tests/fuzz/graph.dict" -max_total_time="$seconds" -timeout=10 -max_len=4096 -rss_limit_mb=2048 \
  -artifact_prefix="$build/findings/" -print_final_stats=1 "$@"
