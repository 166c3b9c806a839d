"""A CPython 3.9+ that is not Debian's, to install the wheel into as a user of pyenv, conda or uv
would: $RLMEM_WHEEL_PYTHON if set, else the oldest found (the one most likely to meet syntax or a
library call newer than it)."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path
from typing import Optional

DEBIAN_PYTHON_DIRS = (Path("/usr/bin"), Path("/bin"))
OLDEST_SUPPORTED = (3, 9)


def candidates() -> list[Path]:
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = [Path(p) for p in sorted(glob.glob(str(pyenv_root / "versions" / "*" / "bin" / "python3")))]
    conda_roots = [os.environ.get("CONDA_PREFIX", ""), str(Path.home() / "miniconda3"), str(Path.home() / "anaconda3"),
                   str(Path.home() / "miniforge3"), "/opt/conda"]
    found += [Path(root) / "bin" / "python3" for root in conda_roots if root]
    found += [Path(p) for p in sorted(glob.glob(str(Path.home() / ".local" / "share" / "uv" / "python" / "*" / "bin" / "python3")))]
    return [path for path in found if path.is_file() and os.access(path, os.X_OK)]


def version_of(python: Path) -> Optional[tuple[int, int]]:
    try:
        done = subprocess.run([str(python), "-c", "import sys, venv, ensurepip; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    return (int(words[0]), int(words[1])) if done.returncode == 0 and len(words) == 2 else None


def other_python() -> tuple[Optional[Path], str]:
    """(the Python to use, "") or (None, why there is none)."""
    chosen = os.environ.get("RLMEM_WHEEL_PYTHON")
    if chosen:
        return Path(chosen), ""
    usable = []
    for python in candidates():
        if python.resolve().parent in DEBIAN_PYTHON_DIRS:
            continue
        version = version_of(python)
        if version is not None and version >= OLDEST_SUPPORTED:
            usable.append((version, str(python)))
    if not usable:
        where = ("pyenv ($PYENV_ROOT or ~/.pyenv), conda (~/miniconda3, ~/anaconda3, ~/miniforge3, /opt/conda), "
                 "uv (~/.local/share/uv/python)")
        return None, (f"no CPython {OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]}+ other than Debian's with venv and "
                      f"ensurepip found (looked in {where}); set RLMEM_WHEEL_PYTHON to one")
    return Path(min(usable)[1]), ""
