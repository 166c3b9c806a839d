#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the snapshot of tests/cli/control_strings_snapshot.py with markup instead of terminal
controls in its frame names, file names and metadata: a script that closes the data block, an
image whose error handler alerts, a comment opener and the JavaScript line separators. A leak of
four steps and an OOM put them in every view.

  hostile_snapshot.py OUT.pickle
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from control_strings_snapshot import snapshot, write  # noqa: E402

CLOSER = "</script><script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"
OTHERS = "<!-- \u2028 \u2029 <style>body{display:none}</style>"


def frames(tag):
    return [{"filename": f"/rl/{IMAGE}.py", "line": 7, "name": f"{tag}{CLOSER}"},
            {"filename": f"/rl/train{OTHERS}.py", "line": 3, "name": f"train_step{IMAGE}"}]


if __name__ == "__main__":
    write(sys.argv[1], snapshot(CLOSER + IMAGE + OTHERS, frames))
