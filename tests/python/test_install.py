"""The offline install the README gives, into a fresh virtual environment:

    python3 -m venv --system-site-packages V && V/bin/pip install --no-build-isolation --no-index ./python

then `import rlmem` there (outside the checkout, RLMEM_LIBRARY unset) must use the librlmem.so the
build copied into the package, and inspect a bundled snapshot. Slow (a venv and a wheel build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SNAPSHOTS

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def clean_env(**extra) -> dict:
    env = {key: value for key, value in os.environ.items()
           if key not in ("RLMEM_LIBRARY", "PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    if not (ROOT / "build" / "librlmem.so").is_file() and not os.environ.get("RLMEM_LIBRARY"):
        pytest.fail("build/librlmem.so is missing: run `make build` first")
    where = tmp_path_factory.mktemp("venv") / "V"
    env = clean_env()
    if os.environ.get("RLMEM_LIBRARY"):
        env["RLMEM_LIBRARY"] = os.environ["RLMEM_LIBRARY"]  # the build step reads it too
    command = f"{PYTHON} -m venv --system-site-packages {where} && {where}/bin/pip install --no-build-isolation " \
              f"--no-index ./python"
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"install failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return where


def test_installed_package_inspects_a_snapshot(venv, tmp_path):
    code = (
        "import json, sys, rlmem\n"
        f"report = rlmem.inspect({str(SNAPSHOTS / 'grpo_leak_logits.pickle.zst')!r})\n"
        "print(json.dumps({'file': rlmem.__file__, 'library': rlmem.library_path(), 'version': rlmem.version(),\n"
        "                  'package_version': rlmem.__version__,\n"
        "                  'site': report['leaks'][0]['site'], 'per_step': report['leaks'][0]['bytes_per_step']}))\n"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=clean_env())
    assert done.returncode == 0, done.stderr
    import json

    seen = json.loads(done.stdout)
    package_dir = Path(seen["file"]).parent
    assert str(package_dir).startswith(str(venv)), f"imported from {package_dir}, not the venv"
    assert seen["library"] == str(package_dir / "librlmem.so"), f"used {seen['library']}"
    from rlmem._version import version_in_cmake_lists

    expected = version_in_cmake_lists(ROOT / "CMakeLists.txt")  # the one place the version is written
    assert seen["version"] == expected and seen["package_version"] == expected, (seen, expected)
    assert (seen["site"], seen["per_step"]) == ("rl/record.py:41 logprobs_of", 49_152_000), seen


def test_install_without_the_library_fails_with_one_clear_line(tmp_path):
    env = clean_env(RLMEM_LIBRARY=str(tmp_path / "missing" / "librlmem.so"))
    where = tmp_path / "V"
    command = f"{PYTHON} -m venv --system-site-packages {where} && {where}/bin/pip install --no-build-isolation " \
              f"--no-index ./python"
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0, "the install should fail without a library"
    expected = f"rlmem: RLMEM_LIBRARY={tmp_path / 'missing' / 'librlmem.so'}: no such file"
    assert expected in done.stdout + done.stderr, done.stdout + done.stderr
