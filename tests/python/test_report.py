"""rlmem.report() against the real librlmem on the bundled real snapshots."""

from __future__ import annotations

import json

import pytest

DATA_OPEN = '<script type="application/json" id="rlmem-data">'


def embedded_data(page: str) -> dict:
    start = page.index(DATA_OPEN) + len(DATA_OPEN)
    return json.loads(page[start:page.index("</script>", start)])


def test_the_page_carries_the_oom_verdicts_inspect_gives(rlmem, snapshot, tmp_path):
    path = snapshot("frag_default_oom.pickle.zst")
    out = tmp_path / "oom.html"
    page = rlmem.report(path, out, limit=None)
    assert page.startswith("<!DOCTYPE html>")
    assert out.read_text(encoding="utf-8") == page
    assert not list(tmp_path.glob("*.partial")), "a .partial file was left behind"
    data = embedded_data(page)
    inspected = rlmem.inspect(path)
    assert data["kind"] == "inspection"
    assert [oom["event_index"] for oom in data["ooms"]] == [oom["event_index"] for oom in inspected["oom"]] == [7971]
    assert data["ooms"][0]["verdict"] == "fragmentation" and data["ooms"][0]["proven"] is True
    assert data["summary"]["peak_allocated_bytes"] == inspected["summary"]["peak_allocated_bytes"]
    assert data["peak_segments"]["event"] == inspected["summary"]["peak_reserved_event"]
    assert "default-src 'none'" in page


def test_bytes_and_options_reach_the_page(rlmem, snapshot):
    data = snapshot("grpo_leak_logits.pickle.zst").read_bytes()
    page = rlmem.report(data, top=3)
    shown = embedded_data(page)
    assert shown["file"] == "<bytes>"
    assert len(shown["peak_by_site"]) == 3
    assert shown["leaks"][0]["site"]["label"] == "rl/record.py:41 logprobs_of"


def test_bad_input_raises_the_clis_message(rlmem, snapshot, tmp_path):
    broken = tmp_path / "broken.pickle"
    broken.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(rlmem.BadInputError):
        rlmem.report(broken, tmp_path / "broken.html")
    assert not (tmp_path / "broken.html").exists(), "a page was written for a broken snapshot"
    with pytest.raises(rlmem.InvalidArgumentError, match="has no device 9"):
        rlmem.report(snapshot("tiny_oom_cpp_stacks.pickle"), device=9)
