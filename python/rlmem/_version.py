"""rlmem's version. CMakeLists.txt's ``project(rlmem VERSION ...)`` is the one place it is written.

An installed package carries ``_stamped_version.py``, which the package build (python/setup.py)
writes from that line after checking that the librlmem.so it bundles reports the same version. A
checkout used in place (``PYTHONPATH=python``) reads the line itself. Nothing here loads librlmem.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

# The checkout's CMakeLists.txt, two folders above this package.
CMAKE_LISTS = Path(__file__).resolve().parents[2] / "CMakeLists.txt"
_PROJECT_LINE = re.compile(r"^project\(rlmem VERSION (\d+)\.(\d+)\.(\d+)\b", re.MULTILINE)


def version_in_cmake_lists(path: Path) -> Optional[str]:
    """``"MAJOR.MINOR.PATCH"`` of the ``project(rlmem VERSION ...)`` line of ``path``; None when the
    file cannot be read or has no such line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    match = _PROJECT_LINE.search(text)
    return ".".join(match.groups()) if match else None


def package_version() -> Optional[str]:
    """The version of the rlmem tree this package comes from: the installed package's stamp, else
    the checkout's CMakeLists.txt; None when there is neither (the package copied out of both)."""
    try:
        from ._stamped_version import VERSION  # noqa: PLC0415 (only in an installed package)
    except ImportError:
        return version_in_cmake_lists(CMAKE_LISTS)
    return VERSION
