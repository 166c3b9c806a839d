"""rlmem.report() against the real librlmem on the bundled real snapshots."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

DATA_OPEN = '<script type="application/json" id="rlmem-data">'
DOCUMENT_OPEN = '<script type="application/json" id="rlmem-document">'


def block_text(page: str, opening: str) -> str:
    start = page.index(opening) + len(opening)
    return page[start:page.index("</script>", start)]


def embedded_data(page: str) -> dict:
    """The views' data of a page."""
    return json.loads(block_text(page, DATA_OPEN))


def embedded_document(page: str) -> dict:
    """The inspect document a page carries."""
    return json.loads(block_text(page, DOCUMENT_OPEN))


# Issue 31, item 3: the page carries `rlmem inspect --json`'s document itself, not a copy that
# drifts: the CLI's bytes, with only '<' escaped as JSON allows (frames hold "<module>").
@pytest.mark.parametrize("name", ["grpo_leak_logits.pickle.zst", "frag_default_oom.pickle.zst", "tiny_oom_cpp_stacks.pickle"])
def test_the_page_carries_the_clis_inspect_document_byte_for_byte(rlmem, cli, snapshot, tmp_path, name):
    path = snapshot(name)
    code, printed, err = cli("inspect", str(path), "--json", "--quiet", "--top", "4")
    assert code == 0, err
    code, _, err = cli("report", str(path), "--quiet", "--top", "4", "-o", str(tmp_path / "page.html"))
    assert code == 0, err
    carried = block_text((tmp_path / "page.html").read_text(encoding="utf-8"), DOCUMENT_OPEN)
    assert carried.replace("\\u003c", "<") == printed, "the page's document differs from `rlmem inspect --json`'s"
    assert json.loads(carried) == json.loads(printed)
    page = rlmem.report(path, top=4)
    assert embedded_document(page) == rlmem.inspect(path, top=4), "rlmem.report()'s document differs from rlmem.inspect()'s"


def test_the_page_carries_the_oom_verdicts_inspect_gives(rlmem, snapshot, tmp_path):
    path = snapshot("frag_default_oom.pickle.zst")
    out = tmp_path / "oom.html"
    page = rlmem.report(path, out, limit=None)
    assert page.startswith("<!DOCTYPE html>")
    assert out.read_text(encoding="utf-8") == page
    assert not list(tmp_path.glob("*.partial")), "a .partial file was left behind"
    data = embedded_data(page)
    document = embedded_document(page)
    inspected = rlmem.inspect(path)
    assert data["kind"] == "inspection"
    assert [oom["event_index"] for oom in document["oom"]] == [oom["event_index"] for oom in inspected["oom"]] == [7971]
    assert document["oom"][0]["verdict"] == "fragmentation" and document["oom"][0]["proven"] is True
    assert document["summary"]["peak_allocated_bytes"] == inspected["summary"]["peak_allocated_bytes"]
    assert data["peak_segments"]["event"] == inspected["summary"]["peak_reserved_event"]
    assert "default-src 'none'" in page


def test_bytes_and_options_reach_the_page(rlmem, snapshot):
    data = snapshot("grpo_leak_logits.pickle.zst").read_bytes()
    page = rlmem.report(data, top=3)
    shown = embedded_document(page)
    assert shown["file"] == "<bytes>"
    assert len(shown["peak"]["by_site"]) == 3
    assert shown["leaks"][0]["site"] == "rl/record.py:41 logprobs_of"


def test_bad_input_raises_the_clis_message(rlmem, snapshot, tmp_path):
    broken = tmp_path / "broken.pickle"
    broken.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(rlmem.BadInputError):
        rlmem.report(broken, tmp_path / "broken.html")
    assert not (tmp_path / "broken.html").exists(), "a page was written for a broken snapshot"
    with pytest.raises(rlmem.InvalidArgumentError, match="has no device 9"):
        rlmem.report(snapshot("tiny_oom_cpp_stacks.pickle"), device=9)


# Issue 28 items 1 and 2: output= goes where the path leads without replacing what is there.
def test_output_to_a_fifo_keeps_the_fifo_and_its_reader_gets_the_page(rlmem, snapshot, tmp_path):
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    page = rlmem.report(snapshot("frag_default.pickle.zst"), fifo)
    reader.join(timeout=60)
    assert not reader.is_alive(), "the FIFO's reader never saw the end of the page"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "page.fifo is no longer a FIFO"
    assert received == [page.encode("utf-8")]


def test_output_to_a_symlink_writes_its_target_and_the_link_stays(rlmem, snapshot, tmp_path):
    (tmp_path / "target.html").write_text("old", encoding="utf-8")
    (tmp_path / "link.html").symlink_to("target.html")
    page = rlmem.report(snapshot("frag_default.pickle.zst"), tmp_path / "link.html")
    assert (tmp_path / "link.html").is_symlink() and os.readlink(tmp_path / "link.html") == "target.html"
    assert (tmp_path / "target.html").read_text(encoding="utf-8") == page


def test_output_to_dev_null_leaves_it_a_character_device(rlmem, snapshot):
    rlmem.report(snapshot("frag_default.pickle.zst"), "/dev/null")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode), "/dev/null is no longer a character device"


def test_a_planted_partial_symlink_is_not_followed(rlmem, snapshot, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("victim", encoding="utf-8")
    (tmp_path / "page.html.partial").symlink_to("victim")
    page = rlmem.report(snapshot("frag_default.pickle.zst"), tmp_path / "page.html")
    assert victim.read_text(encoding="utf-8") == "victim", "the planted link was written through"
    assert os.readlink(tmp_path / "page.html.partial") == "victim"
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "page.html.partial", "victim"]


def test_an_unwritable_output_is_an_oserror_with_the_clis_line(rlmem, snapshot, tmp_path):
    missing = tmp_path / "no" / "page.html"
    with pytest.raises(OSError) as caught:
        rlmem.report(snapshot("frag_default.pickle.zst"), missing)
    assert caught.value.errno == 2 and caught.value.strerror == f"cannot write {missing}: No such file or directory"
