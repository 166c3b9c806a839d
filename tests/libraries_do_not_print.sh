#!/usr/bin/env bash
# Libraries report through return values; only src/cli writes to the terminal or exits.
# Usage: libraries_do_not_print.sh [--debug-stop-allowed] LIBRARY...
# --debug-stop-allowed: a debug build (RLMEM_DEBUG >= 1), whose one stop at a broken assertion or
# invariant writes its text with fprintf to stderr and calls abort; every other symbol still fails.
set -u
forbidden=' (printf|puts|fputs|fprintf|fwrite|exit|abort|_exit)$|std::cout|std::cerr|\bstdout\b|\bstderr\b'
if [ "${1:-}" = --debug-stop-allowed ]; then
  forbidden=' (printf|puts|fputs|fwrite|exit|_exit)$|std::cout|std::cerr|\bstdout\b'
  shift
fi
status=0
for library in "$@"; do
  found=$(nm -C --undefined-only "$library" 2>/dev/null | grep -E "$forbidden" || true)
  if [ -n "$found" ]; then
    echo "FAIL $(basename "$library") uses terminal or exit symbols:"; echo "$found"; status=1
  fi
done
[ $status -eq 0 ] && echo "libraries neither print nor exit"
exit $status
