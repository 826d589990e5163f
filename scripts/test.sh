#!/usr/bin/env bash
# Builds fusejit (installing missing packages first) and runs the whole test suite with ctest: the
# C++ suites and pytest on the Python package (the `pytest` test, in BUILD/venv).
# Tests labelled `gpu` report "skipped" where there is no CUDA driver or GPU.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  echo "usage: scripts/test.sh [ctest options...]   (e.g. -R test_cli, -L gpu)"
  exit 0
fi
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
