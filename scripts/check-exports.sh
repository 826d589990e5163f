#!/usr/bin/env bash
# Fails if a shared library exports a defined symbol outside namespace fusejit (lib/exports.map
# keeps fmt, nlohmann-json and standard-library instantiations local, so a host application with
# other versions of them cannot interpose on libfusejit's copies or have its own replaced).
#   usage: scripts/check-exports.sh path/to/libfusejit.so
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -euo pipefail
lib=$1
# Demangled names of the defined dynamic symbols; a name mentioning fusejit:: is fusejit's own
# (a function, a vtable or typeinfo of a fusejit class, or a template instantiated over one).
all=$(nm -DC --defined-only "$lib" | sed -E 's/^[0-9a-f]* +[A-Za-z] +//')
foreign=$(grep -v 'fusejit::' <<< "$all" | grep -vE '^(FUSEJIT_[0-9.]+|_init|_fini)$' || true)
if [ -n "$foreign" ]; then
  echo "check-exports: $lib exports $(wc -l <<< "$foreign") symbols that do not name namespace fusejit, e.g.:" >&2
  head -5 <<< "$foreign" >&2
  exit 1
fi
echo "check-exports: $lib exports $(wc -l <<< "$all") symbols, each naming namespace fusejit"
