#!/usr/bin/env python3
"""Writes dist/rlmem-<version>-py3-none-manylinux_2_<y>_<arch>.whl (make wheel) without setuptools.

    tools/wheel/build_wheel.py --library build/librlmem.so --command build/rlmem --out dist

The wheel holds python/rlmem, the library (rlmem/librlmem.so, which ctypes loads by path) and the
rlmem executable (rlmem/_bin/rlmem, run by the `rlmem` console entry point and `python -m rlmem`).
The version is CMakeLists.txt's (read through python/rlmem/_version.py) and must be the one the
library and the executable report. Their NEEDED libraries must be glibc's, libstdc++, libgcc_s and
libm, or one the wheel carries: the build links zstd and zlib in, and re2 into the executable;
librlmem needs libre2.so.9 (Debian's libre2.a cannot go into a shared object), which is copied
beside it (its RUNPATH is $ORIGIN) and must itself need only the system's. The platform tag is
the highest GLIBC_2.y symbol version any of them needs, so that pip accepts the wheel exactly
where the symbols are there.
Their GLIBCXX and CXXABI versions must be within Ubuntu 22.04's libstdc++ (GCC 12). Metadata comes
from python/pyproject.toml. The archive is reproducible: fixed times, sorted entries.
Any refusal is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import csv
import hashlib
import importlib.util
import io
import platform
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "python" / "rlmem"
# Shared libraries the system provides on every manylinux host: glibc's parts, libstdc++, libgcc_s.
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
                    "libdl.so.2", "libpthread.so.0", "librt.so.1"}
# Ubuntu 22.04's libstdc++6 is GCC 12's (Debian 12's too): the newest libstdc++ the wheel may need.
LIBSTDCXX_LIMITS = {"GLIBCXX": (3, 4, 30), "CXXABI": (1, 3, 13)}
LIBSTDCXX_WHERE = "Ubuntu 22.04's libstdc++ (GCC 12)"
# Libraries the wheel carries beside librlmem, when librlmem needs them (copied from the system).
CARRIED_LIBRARIES = {"libre2.so.9"}
# Written into the package by the build, never taken from the checkout.
GENERATED = {"librlmem.so", "_stamped_version.py"}
# 1980-01-01, the earliest time a zip entry can hold: the same inputs give the same wheel.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class Refusal(Exception):
    """What stops the build, said in one line."""


def tree_version() -> str:
    spec = importlib.util.spec_from_file_location("rlmem_version_of_tree", PACKAGE_DIR / "_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.version_in_cmake_lists(ROOT / "CMakeLists.txt")
    if found is None:
        raise Refusal(f"{ROOT / 'CMakeLists.txt'} has no `project(rlmem VERSION X.Y.Z` line")
    return found


def library_version(path: Path) -> str:
    try:
        library = ctypes.CDLL(str(path.resolve()))
    except OSError as error:
        raise Refusal(f"{path} cannot be loaded: {error}") from None
    try:
        version = library.rlmem_version
    except AttributeError:
        raise Refusal(f"{path} is not librlmem: it has no rlmem_version") from None
    version.restype = ctypes.c_char_p
    return version().decode("utf-8", "replace")


def command_version(path: Path) -> str:
    done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2 or words[0] != "rlmem":
        raise Refusal(f"{path} --version printed {done.stdout.strip()!r} (exit {done.returncode}), not `rlmem X.Y.Z`")
    return words[1]


def readelf(flag: str, path: Path) -> str:
    done = subprocess.run(["readelf", flag, "--wide", str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise Refusal(f"readelf {flag} {path} failed: {done.stderr.strip()}")
    return done.stdout


def needed_libraries(path: Path) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("--dynamic", path))


def symbol_versions(path: Path) -> dict[str, set[tuple[int, ...]]]:
    """{"GLIBC": {(2, 34), ...}, "GLIBCXX": {...}, "CXXABI": {...}}: the versions its version-needs
    section asks of the system's libraries."""
    found: dict[str, set[tuple[int, ...]]] = {}
    for family, numbers in re.findall(r"Name: (GLIBC|GLIBCXX|CXXABI)_([0-9.]+)\b", readelf("--version-info", path)):
        found.setdefault(family, set()).add(tuple(int(n) for n in numbers.split(".")))
    return found


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in version)


def carried_libraries(library: Path) -> list[Path]:
    """The files of the CARRIED_LIBRARIES librlmem needs, as the dynamic loader finds them here."""
    wanted = sorted(set(needed_libraries(library)) & CARRIED_LIBRARIES)
    if not wanted:
        return []
    done = subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=60)
    found = dict(re.findall(r"^\s*(\S+) => (/\S+)", done.stdout, re.MULTILINE))
    missing = [name for name in wanted if name not in found]
    if missing:
        raise Refusal(f"{library} needs {', '.join(missing)}, which ldd does not find on this machine")
    return [Path(found[name]) for name in wanted]


def check_binaries(paths: list[Path], carried: set[str]) -> dict[str, tuple[int, ...]]:
    """The highest GLIBC, GLIBCXX and CXXABI versions the binaries need, after checking their
    NEEDED libraries (the system's, or one of ``carried``) and libstdc++ versions."""
    highest: dict[str, tuple[int, ...]] = {}
    for path in paths:
        foreign = sorted(set(needed_libraries(path)) - SYSTEM_LIBRARIES - carried)
        if foreign:
            raise Refusal(f"{path} needs {', '.join(foreign)}, which a wheel cannot take from the system "
                          f"(build it with `cmake --preset release`, which links zstd, zlib and re2 in)")
        for family, versions in symbol_versions(path).items():
            highest[family] = max(versions | {highest.get(family, ())})
            limit = LIBSTDCXX_LIMITS.get(family)
            if limit is not None and highest[family] > limit:
                raise Refusal(f"{path} needs {family}_{dotted(highest[family])}, newer than {LIBSTDCXX_WHERE}'s "
                              f"{family}_{dotted(limit)}")
    if "GLIBC" not in highest:
        raise Refusal(f"{', '.join(map(str, paths))} need no GLIBC symbol version: not binaries built against glibc")
    return highest


def platform_tag(glibc: tuple[int, ...]) -> str:
    machine = platform.machine()
    if machine != "x86_64":
        raise Refusal(f"this machine is {machine}: the wheel is built for x86_64 only")
    major, minor = glibc[0], glibc[1]
    return f"manylinux_{major}_{minor}_{machine}"


def metadata(version: str) -> str:
    project = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    for requirement in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {requirement}")
    for extra, requirements in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines.extend(f'Requires-Dist: {requirement}; extra == "{extra}"' for requirement in requirements)
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / "python" / project["readme"]).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + readme


def package_files() -> list[tuple[str, Path]]:
    """(name in the wheel, file) for the package's sources: every .py file and py.typed under
    python/rlmem, as pyproject.toml's packages and package data name them."""
    files = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        relative = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or "__pycache__" in relative.parts or relative.as_posix() in GENERATED:
            continue
        if path.suffix == ".py" or path.name == "py.typed":
            files.append((f"rlmem/{relative.as_posix()}", path))
    return files


def record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return [name, f"sha256={digest}", str(len(data))]


def write_wheel(target: Path, entries: list[tuple[str, bytes, bool]], record_name: str) -> None:
    """entries: (name, contents, executable); RECORD is written last, with every entry's hash."""
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
            writer.writerow(record_line(name, data))
        writer.writerow([record_name, "", ""])
        info = zipfile.ZipInfo(record_name, date_time=ZIP_TIME)
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        wheel.writestr(info, record.getvalue().encode("utf-8"))


def build(library: Path, command: Path, out: Path) -> Path:
    for path in (library, command):
        if not path.is_file():
            raise Refusal(f"{path}: no such file (build it with `make build`)")
    # What the binaries need is checked before the library is loaded to read its version.
    carried = carried_libraries(library)
    highest = check_binaries([library, command, *carried], {path.name for path in carried})
    version = tree_version()
    for path, seen in ((library, library_version(library)), (command, command_version(command))):
        if seen != version:
            raise Refusal(f"{path} is rlmem {seen}, but CMakeLists.txt says {version}: rebuild it")
    tag = platform_tag(highest["GLIBC"])
    dist_info = f"rlmem-{version}.dist-info"
    stamp = (f'"""Written by tools/wheel/build_wheel.py from CMakeLists.txt when this wheel was built."""\n\n'
             f'VERSION = "{version}"\n')
    entries = [(name, path.read_bytes(), False) for name, path in package_files()]
    entries += [
        ("rlmem/_stamped_version.py", stamp.encode("utf-8"), False),
        ("rlmem/librlmem.so", library.resolve().read_bytes(), True),
        ("rlmem/_bin/rlmem", command.resolve().read_bytes(), True),
        *((f"rlmem/{path.name}", path.resolve().read_bytes(), True) for path in carried),
        (f"{dist_info}/METADATA", metadata(version).encode("utf-8"), False),
        (f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: rlmem tools/wheel/build_wheel.py\n"
                                f"Root-Is-Purelib: false\nTag: py3-none-{tag}\n").encode("utf-8"), False),
        (f"{dist_info}/entry_points.txt", b"[console_scripts]\nrlmem = rlmem.__main__:main\n", False),
        (f"{dist_info}/LICENSE", (ROOT / "LICENSE").read_bytes(), False),
    ]
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"rlmem-{version}-py3-none-{tag}.whl"
    for stale in out.glob("rlmem-*.whl"):
        stale.unlink()
    write_wheel(target, entries, f"{dist_info}/RECORD")
    print(f"{target}: {target.stat().st_size:,} bytes; needs GLIBC_{dotted(highest['GLIBC'])}, "
          f"GLIBCXX_{dotted(highest.get('GLIBCXX', (0,)))}, CXXABI_{dotted(highest.get('CXXABI', (0,)))}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="librlmem.so of the wheel's build")
    parser.add_argument("--command", type=Path, required=True, help="the rlmem executable of the wheel's build")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the wheel into")
    arguments = parser.parse_args()
    try:
        build(arguments.library, arguments.command, arguments.out)
    except Refusal as refusal:
        sys.stderr.write(f"build_wheel: {refusal}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
