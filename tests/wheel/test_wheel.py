"""The wheel of `make wheel` (tools/wheel/build_wheel.py), as pip and the system see it.

Run (make test-wheel, after make wheel and the release build):
    RLMEM_WHEEL=dist/rlmem-*.whl RLMEM_BUILD=build /usr/bin/python3 -m pytest -q -rs tests/wheel

* the archive: every file in RECORD with its sha256 and size, the tags of WHEEL and of its name,
  the platform tag equal to the highest GLIBC version its binaries need (read with objdump, not
  the readelf the builder reads);
* its librlmem and rlmem take only glibc, libstdc++, libgcc_s and libm from the system (librlmem's
  libre2.so.9 is carried beside it and found there), and the C++ runtime librlmem throws with is
  the system's: the release build's test of the OOM exception
  (a c10::OutOfMemoryError caught by a stand-in for libc10) passes against the wheel's library;
* installed with `pip install --no-index` into a plain venv of a Python that is not Debian's
  (pyenv, conda, uv; skipped, with the reason, where the machine has none): the `rlmem` command,
  `python -m rlmem` and `import rlmem` give what the release build gives on a bundled snapshot.
"""

from __future__ import annotations

import base64
import csv
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from find_python import other_python

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("RLMEM_BUILD", ROOT / "build"))
SNAPSHOT = ROOT / "testdata" / "snapshots" / "grpo_leak_logits.pickle.zst"
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}
# Debian's libre2.a cannot go into a shared object: librlmem needs libre2.so.9, carried beside it.
CARRIED_LIBRARIES = {"libre2.so.9"}


def wheel_path() -> Path:
    pattern = os.environ.get("RLMEM_WHEEL", str(ROOT / "dist" / "rlmem-*.whl"))
    found = sorted(glob.glob(pattern))
    if len(found) != 1:
        pytest.fail(f"expected one wheel matching {pattern} (make wheel), found {found}")
    return Path(found[0])


def version_of_tree() -> str:
    match = re.search(r"^project\(rlmem VERSION (\d+\.\d+\.\d+)", (ROOT / "CMakeLists.txt").read_text(), re.MULTILINE)
    assert match, "CMakeLists.txt has no project(rlmem VERSION ...) line"
    return match.group(1)


def run(command, **options) -> subprocess.CompletedProcess:
    options.setdefault("timeout", 120)
    return subprocess.run(command, capture_output=True, text=True, **options)


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel_path()) as wheel:
        wheel.extractall(where)
    return where


def needed(path: Path) -> list[str]:
    done = run(["readelf", "--dynamic", "--wide", str(path)])
    assert done.returncode == 0, done.stderr
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", done.stdout)


def test_record_lists_every_file_with_its_hash_and_size():
    with zipfile.ZipFile(wheel_path()) as wheel:
        names = set(wheel.namelist())
        record_name = f"rlmem-{version_of_tree()}.dist-info/RECORD"
        rows = list(csv.reader(io.StringIO(wheel.read(record_name).decode())))
        listed = {row[0] for row in rows}
        assert listed == names, f"in the archive, not in RECORD: {names - listed}; in RECORD only: {listed - names}"
        for name, digest, size in rows:
            if name == record_name:
                assert (digest, size) == ("", ""), f"RECORD's own row: {digest!r}, {size!r}"
                continue
            data = wheel.read(name)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (expected, str(len(data))), f"{name}: RECORD says {digest} {size}"


def test_holds_the_package_the_library_and_the_command():
    version = version_of_tree()
    with zipfile.ZipFile(wheel_path()) as wheel:
        names = set(wheel.namelist())
        sources = {f"rlmem/{path.relative_to(ROOT / 'python' / 'rlmem').as_posix()}"
                   for path in (ROOT / "python" / "rlmem").rglob("*.py") if "__pycache__" not in path.parts}
        sources.discard("rlmem/_stamped_version.py")
        assert sources <= names, f"package files missing from the wheel: {sorted(sources - names)}"
        for name in ("rlmem/librlmem.so", "rlmem/_bin/rlmem", "rlmem/py.typed", "rlmem/_stamped_version.py"):
            assert name in names, f"{name} missing from the wheel"
        assert wheel.getinfo("rlmem/_bin/rlmem").external_attr >> 16 & 0o111, "the command is not executable"
        stamp = wheel.read("rlmem/_stamped_version.py").decode()
        assert f'VERSION = "{version}"' in stamp, stamp
        entry_points = wheel.read(f"rlmem-{version}.dist-info/entry_points.txt").decode()
        assert entry_points == "[console_scripts]\nrlmem = rlmem.__main__:main\n", entry_points
        metadata = wheel.read(f"rlmem-{version}.dist-info/METADATA").decode()
        assert f"Name: rlmem\nVersion: {version}\n" in metadata, metadata[:200]
        wheel_tags = re.findall(r"^Tag: (.+)$", wheel.read(f"rlmem-{version}.dist-info/WHEEL").decode(), re.MULTILINE)
    name_tag = wheel_path().name[len(f"rlmem-{version}-"):-len(".whl")]
    assert wheel_tags == [name_tag], f"WHEEL's tags {wheel_tags}, the file name's {name_tag}"


def binaries(unpacked: Path) -> list[Path]:
    package = unpacked / "rlmem"
    return [package / "librlmem.so", package / "_bin" / "rlmem", *(package / name for name in sorted(CARRIED_LIBRARIES)
                                                                   if (package / name).is_file())]


def test_platform_tag_is_the_newest_glibc_the_binaries_need(unpacked):
    versions = set()
    for path in binaries(unpacked):
        done = run(["objdump", "-T", str(path)])
        assert done.returncode == 0, done.stderr
        versions |= {(int(major), int(minor)) for major, minor in re.findall(r"\bGLIBC_(\d+)\.(\d+)", done.stdout)}
    major, minor = max(versions)
    assert wheel_path().name.endswith(f"-py3-none-manylinux_{major}_{minor}_x86_64.whl"), \
        f"the binaries need GLIBC_{major}.{minor}; the wheel is {wheel_path().name}"


def test_libstdcxx_versions_are_within_ubuntu_22_04(unpacked):
    # Ubuntu 22.04's libstdc++6 is GCC 12's: GLIBCXX_3.4.30, CXXABI_1.3.13.
    limits = {"GLIBCXX": (3, 4, 30), "CXXABI": (1, 3, 13)}
    for path in binaries(unpacked):
        done = run(["objdump", "-T", str(path)])
        for family, limit in limits.items():
            seen = {tuple(int(n) for n in v.split(".")) for v in re.findall(rf"\b{family}_([0-9.]+)\b", done.stdout)}
            assert seen and max(seen) <= limit, f"{path.name} needs {family} {max(seen, default=None)}, limit {limit}"


def test_binaries_take_only_glibc_and_libstdcxx_from_the_system(unpacked):
    package = unpacked / "rlmem"
    carried = {name for name in CARRIED_LIBRARIES if (package / name).is_file()}
    for path in binaries(unpacked):
        libraries = needed(path)
        allowed = SYSTEM_LIBRARIES | (carried if path.name == "librlmem.so" else set())
        assert set(libraries) <= allowed, f"{path.name} needs {libraries}; the system gives {sorted(allowed)}"
        assert "libstdc++.so.6" in libraries, f"{path.name} does not take libstdc++ from the system: {libraries}"
    assert carried == set(needed(package / "librlmem.so")) & CARRIED_LIBRARIES, \
        f"carried {sorted(carried)}, librlmem needs {needed(package / 'librlmem.so')}"


def test_library_finds_what_the_wheel_carries_beside_it(unpacked):
    library = unpacked / "rlmem" / "librlmem.so"
    carried = sorted(set(needed(library)) & CARRIED_LIBRARIES)
    if not carried:
        return
    runpath = re.search(r"\(RUNPATH\)\s+Library runpath: \[([^\]]*)\]", run(["readelf", "-d", str(library)]).stdout)
    assert runpath and "$ORIGIN" in runpath.group(1).split(":"), f"librlmem's RUNPATH: {runpath and runpath.group(1)}"
    resolved = run(["ldd", str(library)]).stdout
    for name in carried:
        assert f"{name} => {library.parent / name}" in resolved, f"{name} not found beside librlmem:\n{resolved}"


def test_library_throws_with_the_systems_cxx_runtime(unpacked):
    # Linked in, libstdc++ would define these itself (hidden), and its throw would not be caught
    # by a catch in torch's copy of the runtime.
    done = run(["objdump", "-T", str(unpacked / "rlmem" / "librlmem.so")])
    for symbol in ("__cxa_throw", "__cxa_allocate_exception"):
        line = next((row for row in done.stdout.splitlines() if row.endswith(f" {symbol}")), None)
        assert line is not None and "*UND*" in line and "CXXABI_1.3" in line, \
            f"{symbol} should be undefined, from CXXABI_1.3 (the system's libstdc++); objdump -T says {line!r}"


def test_out_of_memory_exception_crosses_from_the_wheels_library(unpacked, tmp_path):
    program = BUILD / "tests" / "torch_out_of_memory_tests"
    if not program.is_file():
        pytest.fail(f"{program} is missing: build the release preset's tests first (make test-release)")
    library = unpacked / "rlmem" / "librlmem.so"
    soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run(["readelf", "-d", str(library)]).stdout)
    assert soname, "the wheel's librlmem.so has no SONAME"
    shutil.copy2(library, tmp_path / soname.group(1))
    for name in CARRIED_LIBRARIES & set(needed(library)):
        shutil.copy2(library.parent / name, tmp_path / name)
    # The test program's RUNPATH names the release build; LD_LIBRARY_PATH comes first.
    environment = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}
    resolved = run(["ldd", str(program)], env=environment).stdout
    assert f"{soname.group(1)} => {tmp_path / soname.group(1)}" in resolved, f"not the wheel's library:\n{resolved}"
    done = run([str(program)], env=environment)
    assert done.returncode == 0, f"the OOM exception from the wheel's librlmem:\n{done.stdout[-3000:]}\n{done.stderr}"
    assert "[  PASSED  ] 4 tests." in done.stdout, done.stdout[-2000:]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    python, reason = other_python()
    if python is None:
        pytest.skip(reason)
    where = tmp_path_factory.mktemp("venv") / "V"
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "RLMEM_LIBRARY", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "VIRTUAL_ENV")}
    environment["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # The venv without its own pip (ensurepip takes half a minute on two busy cores): the base
    # Python's pip installs into it (pip --python, from pip 22.3), else the venv gets its pip.
    done = run([str(python), "-m", "venv", "--without-pip", str(where)], env=environment)
    assert done.returncode == 0, f"{python} -m venv: {done.stderr}"
    install = ["install", "--no-index", str(wheel_path())]
    done = run([str(python), "-m", "pip", "--python", str(where / "bin" / "python"), *install], env=environment, timeout=300)
    if done.returncode != 0 and ("no such option: --python" in done.stderr or "No module named pip" in done.stderr):
        assert run([str(where / "bin" / "python"), "-m", "ensurepip"], env=environment, timeout=300).returncode == 0
        done = run([str(where / "bin" / "python"), "-m", "pip", *install], env=environment, timeout=300)
    assert done.returncode == 0, f"pip install --no-index {wheel_path().name} with {python}:\n{done.stdout}\n{done.stderr}"
    print(f"wheel installed with {python}")
    return where


def in_venv(venv: Path, arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "RLMEM_LIBRARY")}
    environment["PATH"] = f"{venv / 'bin'}:{environment.get('PATH', '')}"
    return run(arguments, cwd=cwd, env=environment)


def test_installed_command_reports_the_version(venv, tmp_path):
    for arguments in ([str(venv / "bin" / "rlmem"), "--version"], [str(venv / "bin" / "python"), "-m", "rlmem", "--version"]):
        done = in_venv(venv, arguments, tmp_path)
        assert (done.returncode, done.stdout) == (0, f"rlmem {version_of_tree()}\n"), (arguments, done.stdout, done.stderr)


def test_installed_command_inspects_as_the_release_build(venv, tmp_path):
    expected = run([str(BUILD / "rlmem"), "inspect", str(SNAPSHOT)])
    assert expected.returncode == 0, expected.stderr
    for arguments in ([str(venv / "bin" / "rlmem")], [str(venv / "bin" / "python"), "-m", "rlmem"]):
        done = in_venv(venv, [*arguments, "inspect", str(SNAPSHOT)], tmp_path)
        assert (done.returncode, done.stdout) == (0, expected.stdout), f"{arguments}: {done.stderr}"


def test_installed_command_keeps_the_bad_input_contract(venv, tmp_path):
    missing = tmp_path / "missing.pickle"
    expected = run([str(BUILD / "rlmem"), "inspect", str(missing)])
    done = in_venv(venv, [str(venv / "bin" / "rlmem"), "inspect", str(missing)], tmp_path)
    assert (done.returncode, done.stderr) == (2, expected.stderr), (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr


def test_installed_package_inspects_as_the_release_build(venv, tmp_path):
    expected = run([str(BUILD / "rlmem"), "inspect", "--json", str(SNAPSHOT)])
    assert expected.returncode == 0, expected.stderr
    code = ("import json, rlmem\n"
            f"report = rlmem.inspect({str(SNAPSHOT)!r})\n"
            "print(json.dumps({'file': rlmem.__file__, 'library': rlmem.library_path(), 'version': rlmem.version(),\n"
            "                  'package_version': rlmem.__version__, 'leaks': report['leaks']}))\n")
    done = in_venv(venv, [str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    package = Path(seen["file"]).parent
    assert package.is_relative_to(venv) and seen["library"] == str(package / "librlmem.so"), seen
    assert seen["version"] == seen["package_version"] == version_of_tree(), seen
    assert seen["leaks"] == json.loads(expected.stdout)["leaks"] and seen["leaks"], seen["leaks"]


def test_builder_refuses_binaries_that_need_more_than_the_system(tmp_path):
    # A library that takes zstd from the system's shared library, as a build without
    # RLMEM_STATIC_DEPS would.
    library = tmp_path / "libneedy.so"
    made = run(["cc", "-shared", "-fPIC", "-o", str(library), "-x", "c", "/dev/null", "-Wl,--no-as-needed", "-lzstd"])
    assert made.returncode == 0, made.stderr
    out = tmp_path / "out"
    out.mkdir()
    done = run([sys.executable, str(ROOT / "tools" / "wheel" / "build_wheel.py"), "--library", str(library),
                "--command", str(BUILD / "rlmem"), "--out", str(out)])
    foreign = sorted(set(needed(library)) - SYSTEM_LIBRARIES - CARRIED_LIBRARIES)
    assert foreign == ["libzstd.so.1"], f"expected the test library to need libzstd.so.1, saw {needed(library)}"
    assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"build_wheel: {library} needs libzstd.so.1, which a wheel cannot take"), done.stderr
    assert not list(out.iterdir()), f"a refused build wrote {list(out.iterdir())}"
