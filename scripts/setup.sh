#!/usr/bin/env bash
# Installs what fusejit needs that is missing (Debian packages, by name), then configures and
# builds it (Release) in ./build. The CUDA toolkit (NVRTC + headers) is expected at
# /usr/local/cuda or $CUDA_HOME; a GPU is optional.
#   usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]
# FUSEJIT_EXTRA_PACKAGES: more Debian packages to install the same way (.ci/run asks for clang,
# for the clang build and the libFuzzer target).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

pkgs=(cmake ninja-build g++ pkg-config libfmt-dev doctest-dev libxxhash-dev libcli11-dev nlohmann-json3-dev)
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
  echo "setup: error: no CUDA toolkit at $cuda (need NVRTC and its headers; set CUDA_HOME)" >&2
  exit 1
fi
export CUDAToolkit_ROOT="$cuda"

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j"$(nproc)"
