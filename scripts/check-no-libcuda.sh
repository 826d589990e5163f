#!/usr/bin/env bash
# Fails if any ELF executable or shared library under the given folders records a dependency on
# libcuda (a DT_NEEDED entry, directly or through the libraries it loads). fusejit dlopen's the
# driver (jit/driver.cpp) so that every binary starts on machines without one; a NEEDED entry
# would break that whatever the build flags (see fusejit_nvrtc in CMakeLists.txt).
#   usage: scripts/check-no-libcuda.sh DIR...
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/check-no-libcuda.sh DIR..." >&2; exit 2; }
bad=0
checked=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" 2>/dev/null | grep -q $'\x7fELF' || continue
  readelf -h "$f" 2>/dev/null | grep -qE 'Type:[[:space:]]+(EXEC|DYN)' || continue
  checked=$((checked + 1))
  if readelf -d "$f" 2>/dev/null | grep -E 'NEEDED' | grep -q 'libcuda\.so'; then
    echo "check-no-libcuda: $f records NEEDED libcuda" >&2
    bad=1
  elif ldd "$f" 2>/dev/null | grep -q 'libcuda\.so'; then
    echo "check-no-libcuda: $f loads libcuda through a library it needs:" >&2
    ldd "$f" | grep 'libcuda\.so' >&2
    bad=1
  fi
done < <(find "$@" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0)
if ((checked == 0)); then
  echo "check-no-libcuda: no ELF binaries found under $*" >&2
  exit 1
fi
((bad == 0)) || exit 1
echo "check-no-libcuda: $checked binaries under $*, none needs libcuda"
