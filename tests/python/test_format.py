"""rlmem._format.format_bytes prints every case of testdata/format/bytes_cases.json as the C++
reference (format_bytes) and the page's script (web/format.js) print it."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT

_CASES = json.loads((ROOT / "testdata" / "format" / "bytes_cases.json").read_text(encoding="utf-8"))["cases"]


def test_the_shared_table_has_its_cases():
    assert len(_CASES) >= 30, f"expected 30 or more shared cases, read {len(_CASES)}"


@pytest.mark.parametrize("case", _CASES, ids=[str(case["bytes"]) for case in _CASES])
def test_format_bytes_prints_each_shared_case_as_the_reference_does(case):
    from rlmem._format import format_bytes

    seen = format_bytes(case["bytes"])
    assert seen == case["text"], f"format_bytes({case['bytes']}): expected {case['text']!r}, seen {seen!r} ({case.get('why', '')})"
