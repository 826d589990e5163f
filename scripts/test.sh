#!/usr/bin/env bash
# Builds fusejit (installing missing packages first) and runs the whole test suite with ctest: the
# C++ suites and pytest on the Python package (the `pytest` test, in BUILD/venv).
# Tests labelled `gpu` report "skipped" where there is no CUDA driver or GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
