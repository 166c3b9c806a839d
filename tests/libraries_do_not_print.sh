#!/usr/bin/env bash
# Libraries report through return values; only src/cli writes to the terminal or exits.
set -u
status=0
for library in "$@"; do
  found=$(nm -C --undefined-only "$library" 2>/dev/null | grep -E ' (printf|puts|fputs|fprintf|fwrite|exit|abort|_exit)$|std::cout|std::cerr|\bstdout\b|\bstderr\b' || true)
  if [ -n "$found" ]; then
    echo "FAIL $(basename "$library") uses terminal or exit symbols:"; echo "$found"; status=1
  fi
done
[ $status -eq 0 ] && echo "libraries neither print nor exit"
exit $status
