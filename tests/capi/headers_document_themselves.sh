#!/usr/bin/env bash
# Every public declaration of the C ABI's headers carries a doc comment: doxygen over rlmem.h and
# rlmem_runtime.h with every warning an error (an undocumented struct member, function or macro,
# a broken @param). Skipped (77) where doxygen is not installed; `make test` installs it.
# Usage: headers_document_themselves.sh INCLUDE_DIR
set -u
include=$1
command -v doxygen >/dev/null 2>&1 || { echo "doxygen is not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/Doxyfile" <<DOXYFILE
INPUT = $include/rlmem/rlmem.h $include/rlmem/rlmem_runtime.h
OUTPUT_DIRECTORY = $work/out
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
WARN_LOGFILE = $work/warnings
DOXYFILE
doxygen "$work/Doxyfile" >/dev/null 2>&1
if [ -s "$work/warnings" ]; then
  echo "FAIL doxygen found $(wc -l <"$work/warnings") undocumented or badly documented declarations:"
  head -20 "$work/warnings"
  exit 1
fi
echo "every public declaration of rlmem.h and rlmem_runtime.h is documented"
