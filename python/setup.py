"""Build step of the rlmem package: copies librlmem.so into it (metadata is in pyproject.toml).

The library comes from $RLMEM_LIBRARY if set, else from the checkout's build/librlmem.so
(`make build`). Without it the build stops with one line saying so. The wheel is tagged for this
platform (it carries a shared library) but not for a Python version or ABI (ctypes loads it).
The version is the checkout's CMakeLists.txt's (rlmem/_version.py reads it); the build stamps it
into the package (rlmem/_stamped_version.py) once the library has reported the same version.
"""

import ctypes
import importlib.util
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARY = "librlmem.so"


def tree_version() -> str:
    """CMakeLists.txt's project version, through rlmem/_version.py (loaded alone: importing the
    package would look for a library)."""
    spec = importlib.util.spec_from_file_location("rlmem_version_of_tree", HERE / "rlmem" / "_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.version_in_cmake_lists(HERE.parent / "CMakeLists.txt")
    if found is None:
        raise SystemExit(f"rlmem: {HERE.parent / 'CMakeLists.txt'} has no `project(rlmem VERSION X.Y.Z` line to take the version from")
    return found


def library_version(path: Path) -> str:
    """What the library's rlmem_version() says."""
    try:
        library = ctypes.CDLL(str(path))
    except OSError as error:
        raise SystemExit(f"rlmem: {path} cannot be loaded: {error}") from None
    library.rlmem_version.restype = ctypes.c_char_p
    return library.rlmem_version().decode("utf-8", "replace")


def library_source() -> Path:
    override = os.environ.get("RLMEM_LIBRARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise SystemExit(f"rlmem: RLMEM_LIBRARY={override}: no such file")
        return path
    path = HERE.parent / "build" / LIBRARY
    if not path.is_file():
        raise SystemExit(
            f"rlmem: {path} does not exist: build it first with `make build` in {HERE.parent} "
            f"(or set RLMEM_LIBRARY to a librlmem.so), then install the package again"
        )
    return path


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        source = library_source()
        version = tree_version()
        bundled = library_version(source)
        if bundled != version:
            raise SystemExit(f"rlmem: {source} is librlmem {bundled}, but this checkout is {version}: rebuild it with "
                             f"`make build` in {HERE.parent}")
        target = Path(self.build_lib) / "rlmem" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        # The file behind build/librlmem.so's link (librlmem.so.MAJOR.MINOR.PATCH): ctypes loads it by path.
        shutil.copy2(source, target)
        (target.parent / "_stamped_version.py").write_text(
            f'"""Written by python/setup.py from CMakeLists.txt when this package was built."""\n\nVERSION = "{version}"\n',
            encoding="utf-8")


class PlatformDistribution(Distribution):
    def has_ext_modules(self):
        return True


commands = {"build_py": BuildWithLibrary}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel
except ImportError:  # no wheel package: pip then installs without building a wheel
    pass

setup(version=tree_version(), cmdclass=commands, distclass=PlatformDistribution)
