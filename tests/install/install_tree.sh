#!/usr/bin/env bash
# make install's tree (cmake --install into a fresh prefix): bin/rlmem, lib/librlmem.so*, the C
# ABI's headers and the Python package, whose librlmem.so and _bin/rlmem lead to the installed
# library and command; the command, `python -m rlmem` and `import rlmem` work from it, outside the
# checkout, and report CMakeLists.txt's version.
# Usage: install_tree.sh BUILD_DIR PROJECT_VERSION SNAPSHOT
set -u
build=$1 version=$2 snapshot=$3
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL $*"; exit 1; }
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; rm -f "$prefix.log"; fail "cmake --install failed"; }
rm -f "$prefix.log"
for file in bin/rlmem "lib/librlmem.so.$version" "lib/librlmem.so.${version%.*}" lib/librlmem.so \
            include/rlmem/rlmem.h include/rlmem/rlmem_runtime.h include/rlmem/version.h \
            lib/python/rlmem/__init__.py lib/python/rlmem/__main__.py lib/python/rlmem/_stamped_version.py; do
  [ -e "$prefix/$file" ] || fail "$file not installed under the prefix"
done
[ "$(readlink -f "$prefix/lib/python/rlmem/librlmem.so")" = "$(readlink -f "$prefix/lib/librlmem.so.$version")" ] \
  || fail "lib/python/rlmem/librlmem.so leads to $(readlink -f "$prefix/lib/python/rlmem/librlmem.so"), not the installed library"
[ "$(readlink -f "$prefix/lib/python/rlmem/_bin/rlmem")" = "$(readlink -f "$prefix/bin/rlmem")" ] \
  || fail "lib/python/rlmem/_bin/rlmem does not lead to bin/rlmem"
grep -q "VERSION = \"$version\"" "$prefix/lib/python/rlmem/_stamped_version.py" || fail "the package's stamp is not $version"
# A C program built against the installed headers and library alone.
printf '#include <rlmem/rlmem.h>\n#include <stdio.h>\nint main(void) { puts(rlmem_version()); return 0; }\n' > "$prefix/v.c"
cc -o "$prefix/v" "$prefix/v.c" -I"$prefix/include" -L"$prefix/lib" -lrlmem -Wl,-rpath,"$prefix/lib" \
  || fail "a C program does not build against the installed rlmem.h and librlmem"
seen=$("$prefix/v") ; [ "$seen" = "$version" ] || fail "rlmem_version() of the installed library: '$seen', expected $version"
cd "$prefix" || fail "cannot enter $prefix"
seen=$("$prefix/bin/rlmem" --version) ; [ "$seen" = "rlmem $version" ] || fail "bin/rlmem --version: '$seen'"
seen=$(env -u RLMEM_LIBRARY PYTHONPATH="$prefix/lib/python" python3 -m rlmem --version)
[ "$seen" = "rlmem $version" ] || fail "python3 -m rlmem --version from the prefix: '$seen'"
seen=$(env -u RLMEM_LIBRARY PYTHONPATH="$prefix/lib/python" python3 -c \
  "import rlmem; print(rlmem.library_path(), rlmem.__version__, len(rlmem.inspect('$snapshot')['leaks']))")
expected="$prefix/lib/python/rlmem/librlmem.so $version 1"
[ "$seen" = "$expected" ] || fail "import rlmem from the prefix: '$seen', expected '$expected'"
echo "installed tree complete; rlmem, python3 -m rlmem, import rlmem and a C program work from it ($version)"
