#!/usr/bin/env bash
# librlmem's SONAME is librlmem.so.MAJOR.MINOR of CMakeLists.txt's project version (the file is
# librlmem.so.MAJOR.MINOR.PATCH), build/librlmem.so is still a path to it (Python, the wheel,
# the tools load it by that path), and the version is written nowhere else as a literal: the
# header, the library, the CLI and the Python package read it from CMakeLists.txt.
# Usage: soname_is_the_project_version.sh LIBRARY_FILE LIBRARY_LINK PROJECT_VERSION SOURCE_DIR
set -u
library=$1 link=$2 version=$3 source=$4
major_minor=${version%.*}
soname=$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "librlmem.so.$major_minor" ] || { echo "FAIL SONAME is '$soname', expected librlmem.so.$major_minor (project version $version)"; exit 1; }
[ "$(basename "$library")" = "librlmem.so.$version" ] || { echo "FAIL the library file is $(basename "$library"), expected librlmem.so.$version"; exit 1; }
[ "$(readlink -f "$link")" = "$(readlink -f "$library")" ] || { echo "FAIL $link does not lead to $library"; exit 1; }
[ -e "$(dirname "$library")/$soname" ] || { echo "FAIL no $soname next to the library (the dynamic loader looks for that name)"; exit 1; }
# Every exported function under the version node RLMEM_MAJOR.MINOR, and none under another.
nodes=$(readelf --dyn-syms -W "$library" | awk '$5 != "LOCAL" && $7 != "UND" && $8 ~ /^rlmem_/ {n = split($8, part, "@"); print part[n]}' | sort -u)
[ "$nodes" = "RLMEM_$major_minor" ] || { echo "FAIL the exported functions' version nodes are '$(echo $nodes)', expected RLMEM_$major_minor"; exit 1; }
# The one place: CMakeLists.txt. A copy anywhere a consumer reads it from is a second place.
copies=$(grep -rnF --exclude-dir=__pycache__ --exclude-dir=build --exclude-dir='*.egg-info' "$version" \
           "$source/include" "$source/src" "$source/python/rlmem" "$source/python/setup.py" "$source/python/pyproject.toml" \
           "$source/tests/capi" "$source/tests/python" "$source/fuzz" "$source/README.md" "$source/Makefile" 2>/dev/null)
if [ -n "$copies" ]; then echo "FAIL the version $version is written outside CMakeLists.txt:"; echo "$copies"; exit 1; fi
echo "SONAME $soname, symbols under RLMEM_$major_minor, file librlmem.so.$version, $link leads to it; $version written only in CMakeLists.txt"
