#!/usr/bin/env python3
"""What tests/docs/examples.py takes from markdown as an example, and what it refuses as markup."""
from __future__ import annotations

import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples import MarkupError, documented_examples, extract  # noqa: E402


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return Path(relative)


class ExtractTest(unittest.TestCase):
    def setUp(self) -> None:
        self.scratch = tempfile.TemporaryDirectory()
        self.root = Path(self.scratch.name)

    def tearDown(self) -> None:
        self.scratch.cleanup()

    def test_prompted_commands_join_their_continuations_and_leave_output_alone(self) -> None:
        page = write(self.root, "README.md", """\
            ```console
            $ rlmem plan --model qwen2.5-1.5b \\
                         --phase train
            rlmem watch  2026-11-23 21:49:13   (output: a console block's commands follow "$ ")
            $ ls testdata
            ```
            """)
        examples = extract(self.root, page, every_example=True)
        self.assertEqual([(e.line, e.kind, e.text) for e in examples],
                         [(2, "command", "rlmem plan --model qwen2.5-1.5b --phase train")])

    def test_shell_blocks_give_bare_rlmem_lines_and_python_blocks_give_their_source(self) -> None:
        page = write(self.root, "README.md", """\
            ```sh
            make build
            build/rlmem inspect testdata/x.pickle   # a comment stays for bash
            ```

            ```python
            import rlmem
            print(rlmem.__version__)
            ```
            """)
        examples = extract(self.root, page, every_example=True)
        self.assertEqual([(e.line, e.kind) for e in examples], [(3, "command"), (7, "python")])
        self.assertEqual(examples[0].text, "build/rlmem inspect testdata/x.pickle   # a comment stays for bash")
        self.assertEqual(examples[1].text, "import rlmem\nprint(rlmem.__version__)\n")

    def test_a_marker_applies_to_the_next_block_only(self) -> None:
        page = write(self.root, "README.md", """\
            <!-- example: needs-gpu: records a CUDA job -->

            ```python
            torch.cuda.memory._record_memory_history()
            ```

            <!-- example: exit 2 -->
            ```sh
            rlmem plan --fit ''
            ```

            ```sh
            rlmem --version
            ```
            """)
        examples = extract(self.root, page, every_example=True)
        self.assertEqual([(e.skip, e.expected_exit) for e in examples],
                         [("needs-gpu: records a CUDA job", 0), (None, 2), (None, 0)])

    def test_docs_pages_give_only_the_examples_that_name_bundled_files(self) -> None:
        write(self.root, "README.md", "```sh\nrlmem inspect snapshot.pickle\n```\n")
        write(self.root, "docs/part.md", """\
            ```
            rlmem watch [--log FILE] [--once]
            $ rlmem replay testdata/snapshots/frag_default.pickle.zst --compare
            ```

            ```python
            import rlmem
            ```
            """)
        examples = documented_examples(self.root)
        self.assertEqual([(str(e.path), e.line) for e in examples], [("README.md", 2), ("docs/part.md", 3)])

    def test_markers_that_cannot_be_read_or_applied_are_refused(self) -> None:
        cases = {
            "<!-- example: gpu -->\n```sh\nrlmem --version\n```\n": "unknown example marker",
            "<!-- example: not-runnable -->\n```sh\nrlmem --version\n```\n": "gives no reason",
            "<!-- example: exit 2 -->\nprose between\n```sh\nrlmem --version\n```\n": "right before a fenced block",
            "```sh\nrlmem --version\n```\n<!-- example: exit 2 -->\n": "no fenced block after it",
        }
        for text, expected in cases.items():
            page = write(self.root, "README.md", text)
            with self.subTest(text=text), self.assertRaisesRegex(MarkupError, expected):
                extract(self.root, page, every_example=True)


if __name__ == "__main__":
    unittest.main()
