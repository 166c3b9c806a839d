# SPDX-License-Identifier: MIT
"""Inputs that are not snapshots at all: the smallest hostile classes, and the pattern for the
others (one `*_cases.py` per area, each a list CASES of run.Case)."""
from run import Case

CASES = [
    Case("not-a-pickle", ["inspect", "{input}"], make_input=lambda: b"hello\n", exits=(2,),
         note="text instead of a snapshot"),
    Case("empty-file", ["inspect", "{input}"], make_input=lambda: b"", exits=(2,), note="zero bytes"),
]
