"""Shared set-up of the Python tests: the package from the checkout, the real librlmem, real snapshots.

Run: /usr/bin/python3 -m pytest -q tests/python      (from the checkout, after `make build`)
librlmem: $RLMEM_LIBRARY, else build/librlmem.so; the CLI for comparisons: $RLMEM_CLI, else build/rlmem.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = ROOT / "python"
SNAPSHOTS = ROOT / "testdata" / "snapshots"
MONITOR_SERIES = ROOT / "testdata" / "monitor"
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def cli_path() -> Path:
    return Path(os.environ.get("RLMEM_CLI", ROOT / "build" / "rlmem"))


@pytest.fixture(scope="session")
def rlmem():
    import rlmem as package

    try:
        package.version()
    except package.LibraryError as error:
        pytest.fail(f"librlmem is needed for these tests: {error}")
    return package


@pytest.fixture(scope="session")
def cli():
    """Runs the rlmem command and returns (exit code, stdout, stderr); skips when it is not built."""
    path = cli_path()
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make build); needed to compare with the CLI")

    def run(*args: str):
        done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def snapshot():
    def path(name: str) -> Path:
        found = SNAPSHOTS / name
        assert found.is_file(), f"bundled snapshot {found} is missing"
        return found

    return path
