#!/usr/bin/env python3
"""Every example of README.md (and of docs/*.md where it names a bundled file) runs as written.

Usage: run_examples.py --rlmem BUILD/rlmem --library BUILD/librlmem.so [--root REPO] [--jobs N]

Each command runs under bash, each python block under this interpreter, in a scratch folder that
looks like the repository root (a link to each of its top-level entries, `build/rlmem` and
`build/librlmem.so` linking to the binaries under test), so `testdata/...` resolves as written and
the files an example writes (`rlmem report X` writes X.html beside you) land in the scratch
folder. `rlmem` on PATH is the binary under test; Python finds the package in python/ and the
library through RLMEM_LIBRARY. An example passes when it exits as documented (0 unless marked
`<!-- example: exit N -->`) and prints something (on stderr when it must fail).
Examples marked needs-gpu or not-runnable are skipped with their reason (a skipped python block
must still compile). Exit 0 when every
example passes, 1 naming each failure by file, line and command, 2 on a usage or markup error.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples import Example, MarkupError, documented_examples  # noqa: E402

EXAMPLE_SECONDS = 120
SHOWN_OUTPUT_CHARS = 600


def scratch_root(scratch: Path, root: Path, rlmem: Path, library: Path) -> Path:
    """A folder where relative paths resolve as from the repository root."""
    work = scratch / "repo"
    work.mkdir()
    for entry in root.iterdir():
        if entry.name not in {"build", ".git"}:
            (work / entry.name).symlink_to(entry)
    (work / "build").mkdir()
    (work / "build" / "rlmem").symlink_to(rlmem)
    (work / "build" / "librlmem.so").symlink_to(library)
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    (bin_dir / "rlmem").symlink_to(rlmem)
    return work


def syntax_error(example: Example) -> str | None:
    """A skipped python block is still compiled: what it shows must at least be Python."""
    try:
        compile(example.text, example.where(), "exec")
    except SyntaxError as error:
        return f"not valid Python (line {error.lineno} of the block: {error.msg})"
    return None


def run_one(example: Example, work: Path, env: dict[str, str]) -> str | None:
    """None when the example behaves as documented, else why not."""
    if example.kind == "python":
        argv = [sys.executable, "-c", example.text]
    else:
        argv = ["bash", "-c", example.text]
    try:
        result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                                errors="replace", timeout=EXAMPLE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"still running after {EXAMPLE_SECONDS} s"
    # rlmem report says what it wrote on stderr; a refusal's one line is on stderr too.
    printed = result.stdout + result.stderr if example.expected_exit == 0 else result.stderr
    if result.returncode != example.expected_exit:
        return (f"exit {result.returncode}, expected {example.expected_exit}; stderr: "
                f"{result.stderr.strip()[-SHOWN_OUTPUT_CHARS:] or '(empty)'}")
    if not printed.strip():
        return f"exit {result.returncode} as expected but printed nothing" + (
            "" if example.expected_exit == 0 else " on stderr")
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlmem", type=Path, required=True, help="the rlmem binary under test")
    parser.add_argument("--library", type=Path, required=True, help="the librlmem.so under test")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = args.root.resolve()
    for given in (args.rlmem, args.library):
        if not given.is_file():
            print(f"run_examples: {given}: no such file", file=sys.stderr)
            return 2
    try:
        examples = documented_examples(root)
    except MarkupError as error:
        print(f"run_examples: {error}", file=sys.stderr)
        return 2

    runnable = [example for example in examples if example.skip is None]
    skipped = [example for example in examples if example.skip is not None]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rlmem-doc-examples-") as scratch:
        work = scratch_root(Path(scratch), root, args.rlmem.resolve(), args.library.resolve())
        env = dict(os.environ)
        env["PATH"] = f"{Path(scratch) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(root / "python")
        env["RLMEM_LIBRARY"] = str(args.library.resolve())
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            verdicts = list(pool.map(lambda example: run_one(example, work, env), runnable))
    failures = [(example, why) for example, why in zip(runnable, verdicts) if why is not None]
    failures += [(example, why) for example in skipped if example.kind == "python"
                 for why in [syntax_error(example)] if why is not None]

    for example in skipped:
        print(f"skipped {example.where()} ({example.skip}): {example.text.splitlines()[0]}")
    for example, why in failures:
        shown = example.text if example.kind == "command" else "the python block:\n" + example.text
        print(f"FAILED {example.where()}: {shown.rstrip()}\n  {why}")
    print(f"{len(runnable)} examples run in {time.monotonic() - started:.1f} s "
          f"({sum(e.kind == 'command' for e in runnable)} commands, "
          f"{sum(e.kind == 'python' for e in runnable)} python blocks), "
          f"{len(failures)} failed, {len(skipped)} skipped")
    if not runnable:
        print("run_examples: no example found to run", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
