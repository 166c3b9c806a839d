"""The examples a reader of README.md and docs/*.md would copy: rlmem command lines and Python blocks.

An example is one of:
- a command line in a fenced block that starts with `rlmem ` or `build/rlmem ` (after a `$ `
  prompt in a block that shows output, or bare in a sh/bash/shell block), with its `\\`
  continuation lines joined;
- a whole ```python block.

README.md gives every example. A docs/*.md page gives those that name a bundled file
(`testdata/...`): the rest of its blocks are synopses and figures recorded on other machines.

An HTML comment on the last non-blank line before a fence says how the block's examples run:
    <!-- example: needs-gpu: REASON -->     skipped here: needs a CUDA device or a live job
    <!-- example: not-runnable: REASON -->  skipped: shown, not meant to be run as written
    <!-- example: exit N -->                runs, and must exit with N (one line on stderr)
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

MARKER = re.compile(r"^<!--\s*example:\s*(?P<body>.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)")
COMMAND = re.compile(r"^(?:build/)?rlmem\s")
SHELL_INFOS = {"sh", "bash", "shell"}  # a console block shows output: only its "$ " lines are commands
SKIP_KINDS = {"needs-gpu", "not-runnable"}


class MarkupError(ValueError):
    """A marker that cannot be read, or one that no fenced block follows."""


@dataclasses.dataclass(frozen=True)
class Example:
    path: Path          # the markdown file, relative to the repository root
    line: int           # 1-based line of the command, or of the python block's first line
    kind: str           # "command" or "python"
    text: str           # the command line (continuations joined) or the block's source
    expected_exit: int = 0
    skip: str | None = None   # "needs-gpu: reason" or "not-runnable: reason"

    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclasses.dataclass(frozen=True)
class _Marker:
    line: int
    expected_exit: int = 0
    skip: str | None = None


def _parse_marker(body: str, path: Path, line: int) -> _Marker:
    exit_match = re.fullmatch(r"exit\s+(\d+)", body)
    if exit_match:
        return _Marker(line, expected_exit=int(exit_match.group(1)))
    kind, _, reason = body.partition(":")
    kind, reason = kind.strip(), reason.strip()
    if kind not in SKIP_KINDS:
        raise MarkupError(f"{path}:{line}: unknown example marker {body!r} "
                          f"(expected 'exit N', 'needs-gpu: REASON' or 'not-runnable: REASON')")
    if not reason:
        raise MarkupError(f"{path}:{line}: the marker {kind!r} gives no reason")
    return _Marker(line, skip=f"{kind}: {reason}")


def _commands(block: list[tuple[int, str]], info: str) -> list[tuple[int, str]]:
    """(line, command) of every rlmem command line in one fenced block."""
    found = []
    index = 0
    while index < len(block):
        number, raw = block[index]
        text = raw.strip()
        prompted = text.startswith("$ ")
        if prompted:
            text = text[2:].lstrip()
        if (prompted or info in SHELL_INFOS) and COMMAND.match(text):
            parts = [text]
            while parts[-1].endswith("\\") and index + 1 < len(block):
                index += 1
                parts[-1] = parts[-1][:-1].rstrip()
                parts.append(block[index][1].strip())
            found.append((number, " ".join(parts)))
        index += 1
    return found


def extract(root: Path, relative: Path, every_example: bool) -> list[Example]:
    """The examples of one markdown file; all of them, or (docs pages) those naming testdata/."""
    lines = (root / relative).read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    marker: _Marker | None = None
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        marker_match = MARKER.match(stripped)
        if marker_match:
            marker = _parse_marker(marker_match.group("body"), relative, index + 1)
            index += 1
            continue
        fence = FENCE.match(lines[index])
        if not fence:
            if stripped and marker is not None:
                raise MarkupError(f"{relative}:{marker.line}: an example marker must come right before a fenced block")
            index += 1
            continue
        info = fence.group("info").lower()
        closing = fence.group("fence")
        block: list[tuple[int, str]] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(closing):
            block.append((index + 1, lines[index]))
            index += 1
        index += 1  # the closing fence
        applied = marker or _Marker(0)
        marker = None
        if info == "python":
            source = "\n".join(text for _, text in block) + "\n"
            if block and (every_example or "testdata/" in source):
                examples.append(Example(relative, block[0][0], "python", source,
                                        applied.expected_exit, applied.skip))
            continue
        for number, command in _commands(block, info):
            if every_example or "testdata/" in command:
                examples.append(Example(relative, number, "command", command,
                                        applied.expected_exit, applied.skip))
    if marker is not None:
        raise MarkupError(f"{relative}:{marker.line}: an example marker with no fenced block after it")
    return examples


def documented_examples(root: Path) -> list[Example]:
    """README.md's examples, then those of docs/*.md that name bundled files, in file order."""
    examples = extract(root, Path("README.md"), every_example=True)
    for page in sorted((root / "docs").glob("*.md")):
        examples += extract(root, page.relative_to(root), every_example=False)
    return examples
