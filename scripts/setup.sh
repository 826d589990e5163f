#!/usr/bin/env bash
# Installs what fusejit needs that is missing (Debian packages, by name), then configures and
# builds it (Release) in BUILD_DIR (default ./build), the Python package included: a virtual
# environment in BUILD_DIR/venv gets the PyPI packages it needs (by name, below), and `import
# fusejit` works there (BUILD_DIR/venv/bin/python, or `source BUILD_DIR/venv/bin/activate`). The
# CUDA toolkit (NVRTC + headers) is expected at /usr/local/cuda or $CUDA_HOME; a GPU is optional.
#   usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#   FUSEJIT_PYTHON=/path/to/python3 picks the interpreter the venv is made from (default: Debian's).
#   FUSEJIT_EXTRA_PACKAGES: more Debian packages to install the same way (.ci/run asks for clang,
#   for the clang build and the libFuzzer target).
set -euo pipefail
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
if [[ "${1:-}" == -* ]]; then
  echo "setup: error: unknown option $1 (usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]; --help)" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

pkgs=(cmake ninja-build g++ pkg-config libfmt-dev doctest-dev libxxhash-dev libcli11-dev nlohmann-json3-dev
      python3-dev python3-venv)
read -r -a extra <<< "${FUSEJIT_EXTRA_PACKAGES:-}"
pkgs+=("${extra[@]}")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing missing packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$cuda/include/nvrtc.h" ]; then
  echo "setup: error: no CUDA toolkit at $cuda (need NVRTC and its headers; set CUDA_HOME, or install it:" \
       "https://developer.nvidia.com/cuda-downloads, e.g. the cuda-toolkit package of NVIDIA's apt repository)" >&2
  exit 1
fi
export CUDAToolkit_ROOT="$cuda"

# The Python package's build and test dependencies, from PyPI by name, into a venv inside the build
# folder (Debian's Python refuses `pip install` outside one: PEP 668). Skipped when all import.
py=${FUSEJIT_PYTHON:-$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3)}
venv="$build/venv"
mkdir -p "$build"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
py_pkgs=(nanobind scikit-build-core numpy pytest ml_dtypes)
if ! "$venv/bin/python" -c "import nanobind, scikit_build_core, numpy, pytest, ml_dtypes" 2>/dev/null; then
  echo "setup: installing Python packages into $venv: ${py_pkgs[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${py_pkgs[@]}"
fi

# Release at -O2 rather than CMake's -O3: ~13% less compile time per file (GCC 12, docs/testing.md
# "CI time"); fusejit's host code is planning, code generation and the launch path, and the
# kernels are compiled by NVRTC or the CPU path with their own flags.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DFUSEJIT_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$(cd "$venv/bin" && pwd)/python" "$@"
cmake --build "$build" -j"$(nproc)"
# `import fusejit` in the venv: its site-packages points at the package laid out in the build folder.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(cd "$build" && pwd)/python" > "$site/fusejit-build.pth"
echo "setup: done: $build/cli/fusejit is the command (try: $build/cli/fusejit run samples/graphs/gpt2_gelu_tanh.txt --dim T=256);"
echo "       $venv/bin/python imports fusejit; scripts/test.sh runs the tests"
