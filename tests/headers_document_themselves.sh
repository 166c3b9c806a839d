#!/usr/bin/env bash
# Every public declaration of rlmem's API headers carries a doc comment: doxygen with every
# warning an error (an undocumented struct, member, function, enum, alias or constant, a broken
# @param), in two runs, one per language:
# - the C ABI's headers, rlmem.h and rlmem_runtime.h, as C (OPTIMIZE_OUTPUT_FOR_C);
# - every part's API header, include/rlmem/<part>/*.hpp outside detail/ folders, as C++. Doxygen
#   checks a namespace's functions, constants and aliases only where the namespace itself is
#   documented, so this run adds a file that documents namespace rlmem (rlmem::detail stays
#   undocumented, and so unchecked).
# Prints the first 20 warnings of a failing run and their count per header. Skipped (77) where
# doxygen is not installed; `make test` installs it.
# Usage: headers_document_themselves.sh INCLUDE_DIR
set -u
include=$1
command -v doxygen >/dev/null 2>&1 || { echo "doxygen is not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs doxygen on the Doxyfile $1 (whose WARN_LOGFILE is $2); on warnings, says so for $3 (what
# was checked), shows the first 20 and the count per header, and returns 1.
check() {
  local doxyfile=$1 warnings=$2 what=$3
  doxygen "$doxyfile" >/dev/null 2>&1
  if [ -s "$warnings" ]; then
    echo "FAIL doxygen found $(grep -c 'warning: ' "$warnings") undocumented or badly documented declarations in $what (expected none):"
    head -20 "$warnings" | sed "s|$include/||"
    echo "warnings per header:"
    grep -o '^[^:]*:[0-9]*: warning: ' "$warnings" | cut -d: -f1 | sed "s|$include/||" | sort | uniq -c | sort -rn
    return 1
  fi
  echo "every public declaration of $what is documented"
}

cat >"$work/Doxyfile.c" <<DOXYFILE
INPUT = "$include/rlmem/rlmem.h" "$include/rlmem/rlmem_runtime.h"
OUTPUT_DIRECTORY = $work/out.c
GENERATE_HTML = NO
GENERATE_LATEX = NO
GENERATE_XML = YES
QUIET = YES
WARN_IF_UNDOCUMENTED = YES
WARN_IF_DOC_ERROR = YES
WARN_NO_PARAMDOC = NO
EXTRACT_ALL = NO
OPTIMIZE_OUTPUT_FOR_C = YES
ENABLE_PREPROCESSING = YES
MACRO_EXPANSION = YES
PREDEFINED = RLMEM_API=
WARN_LOGFILE = $work/warnings.c
DOXYFILE

mapfile -t headers < <(find "$include/rlmem" -mindepth 2 -maxdepth 2 -name '*.hpp' -not -path '*/detail/*' | sort)
if [ "${#headers[@]}" -eq 0 ]; then
  echo "FAIL no part's API header found under $include/rlmem/<part>/ (expected some *.hpp)"
  exit 1
fi
cat >"$work/namespace.hpp" <<'HEADER'
/// rlmem's C++ API, one part per folder of include/rlmem.
namespace rlmem {}
HEADER
cat >"$work/Doxyfile.cpp" <<DOXYFILE
INPUT = "$work/namespace.hpp" $(printf '"%s" ' "${headers[@]}")
OUTPUT_DIRECTORY = $work/out.cpp
GENERATE_HTML = NO
GENERATE_LATEX = NO
GENERATE_XML = NO
QUIET = YES
WARN_IF_UNDOCUMENTED = YES
WARN_IF_DOC_ERROR = YES
WARN_NO_PARAMDOC = NO
EXTRACT_ALL = NO
EXTRACT_PRIVATE = NO
WARN_LOGFILE = $work/warnings.cpp
DOXYFILE

failed=0
check "$work/Doxyfile.c" "$work/warnings.c" "rlmem.h and rlmem_runtime.h" || failed=1
check "$work/Doxyfile.cpp" "$work/warnings.cpp" "the ${#headers[@]} part API headers (include/rlmem/<part>/*.hpp)" || failed=1
exit $failed
