"""Build step of the rlmem package: copies librlmem.so into it (metadata is in pyproject.toml).

The library comes from $RLMEM_LIBRARY if set, else from the checkout's build/librlmem.so
(`make build`). Without it the build stops with one line saying so. The wheel is tagged for this
platform (it carries a shared library) but not for a Python version or ABI (ctypes loads it).
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARY = "librlmem.so"


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
        target = Path(self.build_lib) / "rlmem" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library_source(), target)


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

setup(cmdclass=commands, distclass=PlatformDistribution)
