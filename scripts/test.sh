#!/usr/bin/env bash
# Builds fusejit (installing missing packages first) and runs the whole test suite with ctest: the
# C++ suites and pytest on the Python package (the `pytest` test, in BUILD/venv).
# Tests labelled `gpu` report "skipped" where there is no CUDA driver or GPU.
#   usage: scripts/test.sh [ctest options...]   (e.g. -R test_cli, -L gpu)
set -euo pipefail
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
