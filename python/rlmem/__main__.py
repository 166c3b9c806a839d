"""The ``rlmem`` command from Python: ``python -m rlmem ...`` and the wheel's ``rlmem`` entry point.

Both run the rlmem executable itself (C++, the same as ``build/rlmem``), replacing this process,
so its exit code, signals and terminal (``rlmem watch``) are the command's own. Where it is looked
for, first match wins:

1. ``_bin/rlmem`` in this package: the wheel bundles it there, and ``make install`` links it there
   to ``PREFIX/bin/rlmem``;
2. ``build/rlmem`` of the checkout this package sits in (``PYTHONPATH=python`` after ``make build``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

COMMAND_NAME = "rlmem"


def candidate_paths() -> list[Path]:
    here = Path(__file__).resolve().parent
    return [here / "_bin" / COMMAND_NAME, here.parent.parent / "build" / COMMAND_NAME]


def command_path() -> Path | None:
    """The rlmem executable this package runs; None when there is none."""
    for path in candidate_paths():
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def main() -> None:
    path = command_path()
    if path is None:
        looked = ", ".join(str(p) for p in candidate_paths())
        sys.stderr.write(f"rlmem: the rlmem executable was not found (looked in: {looked}); install the wheel "
                         f"(make wheel) or build it with `make build` in the rlmem checkout\n")
        sys.exit(2)
    sys.stdout.flush()
    os.execv(str(path), [COMMAND_NAME, *sys.argv[1:]])


if __name__ == "__main__":
    main()
