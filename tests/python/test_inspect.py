"""rlmem.inspect() against the real librlmem on the bundled real snapshots."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MiB = 1024**2


def test_version_is_the_library_abi(rlmem):
    # One place: CMakeLists.txt's project version, which the package reads and the library was built with.
    from conftest import ROOT
    from rlmem._version import version_in_cmake_lists

    expected = version_in_cmake_lists(ROOT / "CMakeLists.txt")
    assert expected is not None, "no project(rlmem VERSION ...) line in CMakeLists.txt"
    assert rlmem.__version__ == expected, f"the package says {rlmem.__version__}, CMakeLists.txt {expected}"
    assert rlmem.version() == expected, f"expected librlmem {expected}, saw {rlmem.version()}"
    assert Path(rlmem.library_path()).name == "librlmem.so"


def test_leak_snapshot_names_the_one_leak(rlmem, snapshot):
    report = rlmem.inspect(snapshot("grpo_leak_logits.pickle.zst"))
    leaks = report["leaks"]
    assert len(leaks) == 1, f"expected exactly one leak, saw {[leak['site'] for leak in leaks]}"
    leak = leaks[0]
    assert leak["site"] == "rl/record.py:41 logprobs_of", f"saw site {leak['site']!r}"
    assert leak["bytes_per_step"] == 49_152_000, f"expected 49,152,000 B/step (46.9 MiB), saw {leak['bytes_per_step']}"
    assert f"{leak['bytes_per_step'] / MiB:.1f}" == "46.9"
    assert leak["first_step"] == 1 and leak["steps"] == 4, f"saw first_step {leak['first_step']}, steps {leak['steps']}"
    assert leak["bytes_at_step_end"] == [0, 49_152_000, 98_304_000, 147_456_000, 196_608_000]
    assert report["schema_version"] == 3 and report["command"] == "inspect"


def test_keys_and_values_of_kept_kv_caches_are_one_leak(rlmem, snapshot):
    report = rlmem.inspect(snapshot("validation_kv_leak.pickle.zst"))
    leaks = report["leaks"]
    assert [leak["site"] for leak in leaks] == ["transformers/cache_utils.py:146,147 update"], \
        f"expected one leak over cache_utils.py lines 146 and 147, saw {[leak['site'] for leak in leaks]}"
    lines = leaks[0]["lines"]
    assert [line["line"] for line in lines] == [146, 147], f"saw lines {[line['line'] for line in lines]}"
    assert leaks[0]["bytes_per_step"] == sum(line["bytes_per_step"] for line in lines) == 3_794_534
    facts = json.loads(snapshot("validation_kv_leak.json").read_text())["allocated_at_step_ends"]
    torch_growth = (facts[-1] - facts[0]) // (len(facts) - 1)
    summary = report["leak_summary"]
    assert summary["growth_per_step_bytes"] == torch_growth == 3_833_856, f"saw {summary}"
    # The issue asks for 10% of torch's growth; the leak is 39,322 B/step (1.03%) under it, exactly.
    assert torch_growth - leaks[0]["bytes_per_step"] == 39_322, \
        f"expected the leak 39,322 B/step under torch's {torch_growth}, saw {leaks[0]['bytes_per_step']}"
    assert summary["explained_fraction"] == 1.0 and summary["growth_without_named_leak"] is False, f"saw {summary}"


def test_oom_snapshot_verdict_is_fragmentation(rlmem, snapshot):
    report = rlmem.inspect(snapshot("frag_default_oom.pickle.zst"))
    assert len(report["oom"]) == 1, f"expected one OOM, saw {len(report['oom'])}"
    oom = report["oom"][0]
    assert oom["verdict"] == "fragmentation", f"saw verdict {oom['verdict']!r}"
    assert oom["requested_bytes"] == 490_880_000, f"expected 490,880,000 B requested, saw {oom['requested_bytes']:,}"
    assert oom["reserved_unallocated_bytes"] == 354_624_000
    assert oom["advice"].startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


def test_clean_snapshot_peaks_equal_torchs_counters(rlmem, snapshot):
    report = rlmem.inspect(snapshot("grpo_clean.pickle.zst"))
    # testdata/README.md: torch.cuda.max_memory_allocated/reserved of the recording run.
    assert report["summary"]["peak_allocated_bytes"] == 747_623_936
    assert report["summary"]["peak_reserved_bytes"] == 811_597_824
    assert report["leaks"] == [], f"a clean run has no leak, saw {report['leaks']}"


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "readonly-memoryview", "pathlike", "str"])
def test_every_input_type_gives_the_same_document(rlmem, snapshot, kind):
    path = snapshot("grpo_leak_logits.pickle.zst")
    raw = path.read_bytes()
    given = {"bytes": raw, "bytearray": bytearray(raw), "memoryview": memoryview(bytearray(raw)),
             "readonly-memoryview": memoryview(raw), "pathlike": path, "str": str(path)}[kind]
    report = rlmem.inspect(given)
    expected_file = str(path) if kind in ("pathlike", "str") else "<bytes>"
    assert report["file"] == expected_file, f"expected file {expected_file!r}, saw {report['file']!r}"
    assert report["leaks"][0]["bytes_per_step"] == 49_152_000
    assert report["summary"]["events"] == 251_183, f"saw {report['summary']['events']} events"


def test_the_document_is_the_clis(rlmem, cli, snapshot):
    path = snapshot("frag_default_oom.pickle.zst")
    code, out, err = cli("inspect", str(path), "--json", "--quiet", "--top", "4")
    assert code == 0, err
    assert rlmem.inspect(str(path), top=4) == json.loads(out), "rlmem.inspect and `rlmem inspect --json` differ"


def test_options_reach_the_library(rlmem, snapshot):
    path = snapshot("grpo_leak_logits.pickle.zst")
    assert len(rlmem.inspect(path, top=3)["peak"]["by_site"]) == 3
    assert rlmem.inspect(path, device=0)["device"] == 0
    marked = rlmem.inspect(path, step_marker=r"record\.py:[0-9]+ grpo_steps")
    assert marked["steps"]["method"] == r"--step-marker record\.py:[0-9]+ grpo_steps", marked["steps"]["method"]
    limited = rlmem.inspect(snapshot("frag_default_oom.pickle.zst"), limit=2_805_590_497)
    oom = limited["oom"][0]
    assert oom["limit_given"] is True and oom["limit_low_bytes"] == oom["limit_high_bytes"] == 2_805_590_497


def test_category_rules_file(rlmem, snapshot, tmp_path, cli):
    rules = tmp_path / "rules.txt"
    rules.write_text("logits  logprobs_of\n", encoding="utf-8")
    path = snapshot("grpo_leak_logits.pickle.zst")
    code, out, err = cli("inspect", str(path), "--json", "--quiet", "--categories", str(rules))
    assert code == 0, err
    mine = rlmem.inspect(path, categories=rules)
    assert mine["categories"] == json.loads(out)["categories"]
    default = rlmem.inspect(path)["categories"]["at_peak"]
    assert mine["categories"]["at_peak"]["logits"] > default["logits"], "the rules file did not reach the library"
    assert mine["categories"]["at_peak"]["optimizer_state"] == 0 < default["optimizer_state"]


def _cli_message(err: str) -> str:
    assert err.startswith("rlmem: ") and err.endswith("\n") and err.count("\n") == 1, f"not one CLI line: {err!r}"
    return err[len("rlmem: "):-1]


@pytest.mark.parametrize("content, code_name", [
    (b"garbage bytes here", "UNKNOWN_FORMAT"),
    (b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.", "FORBIDDEN_OPCODE"),
    (b"\x80\x04\x95", "TRUNCATED"),
])
def test_bad_files_raise_the_clis_message(rlmem, cli, tmp_path, content, code_name):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    code, _, err = cli("inspect", str(path), "--json")
    assert code == 2
    with pytest.raises(rlmem.BadInputError) as caught:
        rlmem.inspect(path)
    assert str(caught.value) == _cli_message(err), f"expected the CLI's {_cli_message(err)!r}, saw {str(caught.value)!r}"
    assert code_name in str(caught.value) or code_name == "TRUNCATED"
    assert isinstance(caught.value, ValueError) and caught.value.status == -2
    assert caught.value.status_name == "RLMEM_E_BAD_INPUT"


def test_forbidden_opcode_is_refused_by_name(rlmem):
    evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03."
    with pytest.raises(rlmem.BadInputError) as caught:
        rlmem.inspect(evil)
    assert str(caught.value) == ("<bytes>: FORBIDDEN_OPCODE at byte 2: the pickle wants to import or call code, which "
                                 "rlmem never does (GLOBAL would import or call code; refused)"), str(caught.value)


def test_missing_file(rlmem, cli, tmp_path):
    missing = tmp_path / "nothing-here.pickle"
    code, _, err = cli("inspect", str(missing))
    assert code == 2
    with pytest.raises(rlmem.BadInputError) as caught:
        rlmem.inspect(missing)
    assert str(caught.value) == _cli_message(err)
    assert "No such file or directory" in str(caught.value)


def test_bad_options_raise_invalid_argument(rlmem, cli, snapshot):
    path = snapshot("grpo_clean.pickle.zst")
    code, _, err = cli("inspect", str(path), "--device", "3")
    assert code == 2
    with pytest.raises(rlmem.InvalidArgumentError) as caught:
        rlmem.inspect(path, device=3)
    assert str(caught.value) == _cli_message(err), f"CLI: {err!r}, Python: {caught.value}"
    with pytest.raises(rlmem.InvalidArgumentError, match="not a valid regular expression"):
        rlmem.inspect(path, step_marker="(")
    with pytest.raises(rlmem.InvalidArgumentError, match="^--top: '0' is not a whole number from 1 to 1000000$"):
        rlmem.inspect(path, top=0)
    with pytest.raises(rlmem.InvalidArgumentError, match="^--limit: '-5' is not a whole number from 0 to 9223372036854775807$"):
        rlmem.inspect(path, limit=-5)
    with pytest.raises(TypeError):
        rlmem.inspect(12345)
    with pytest.raises(rlmem.BadInputError, match="cannot be read"):
        rlmem.inspect(path, categories="/nonexistent/rules.txt")


@pytest.mark.parametrize("device", [2**64, 2**64 + 3, 2**63, 32768, -1])
def test_a_device_outside_the_clis_range_is_refused_with_its_words_never_wrapped(rlmem, cli, snapshot, device):
    # Issue 28: device=2**64 wrapped to 0 in ctypes and gave device 0's report.
    path = snapshot("grpo_clean.pickle.zst")
    code, _, err = cli("inspect", str(path), "--device", str(device))
    assert code == 2
    # The CLI's words, less its pointer to its own --help.
    expected = _cli_message(err).removesuffix(" (see rlmem inspect --help)")
    assert expected == f"--device: '{device}' is not a whole number from 0 to 32767", f"CLI: {err!r}"
    with pytest.raises(rlmem.InvalidArgumentError) as caught:
        rlmem.inspect(path, device=device)
    assert str(caught.value) == expected, f"expected the CLI's {expected!r}, seen {str(caught.value)!r}"
    with pytest.raises(rlmem.InvalidArgumentError) as caught:
        rlmem.report(path, device=device)
    assert str(caught.value) == expected, f"expected the CLI's {expected!r}, seen {str(caught.value)!r}"


@pytest.mark.parametrize("top", [2**32, 2**32 + 10, 2**64, 1_000_001, -1])
def test_a_top_outside_the_clis_range_is_refused_with_its_words_never_wrapped(rlmem, cli, snapshot, top):
    # top is a uint32_t in the C ABI: 2**32 + 10 would have arrived as 10.
    path = snapshot("grpo_clean.pickle.zst")
    code, _, err = cli("inspect", str(path), f"--top={top}")
    assert code == 2
    expected = _cli_message(err).removesuffix(" (see rlmem inspect --help)")
    with pytest.raises(rlmem.InvalidArgumentError) as caught:
        rlmem.inspect(path, top=top)
    assert str(caught.value) == expected, f"expected the CLI's {expected!r}, seen {str(caught.value)!r}"


@pytest.mark.parametrize("flag, name, value", [("--top", "top", 2_000_000), ("--top", "top", 0), ("--device", "device", 40_000)])
def test_a_bad_option_is_refused_by_the_cli_the_c_abi_and_python_with_one_line(rlmem, cli, snapshot, flag, name, value):
    # Issue 31, item 3: --top 2000000 was refused by the CLI and accepted by the C ABI. Python
    # now holds no range of its own: librlmem's check (rlmem_check_inspect_option, and the
    # struct's check behind rlmem_inspect_file) words the refusal for all three.
    path = snapshot("grpo_clean.pickle.zst")
    code, _, err = cli("inspect", str(path), flag, str(value))
    assert code == 2
    expected = _cli_message(err).removesuffix(" (see rlmem inspect --help)")
    with pytest.raises(rlmem.InvalidArgumentError) as caught:
        rlmem.inspect(path, **{name: value})
    assert str(caught.value) == expected, f"Python: expected the CLI's {expected!r}, seen {str(caught.value)!r}"

    from rlmem import _lib

    lib, _ = _lib.load()
    options = _lib.InspectOptions()
    lib.rlmem_inspect_options_init(ctypes.byref(options))
    setattr(options, name, value)
    document, error = ctypes.c_void_p(), ctypes.c_void_p()
    status = lib.rlmem_inspect_file(os.fsencode(path), ctypes.byref(options), ctypes.byref(document), ctypes.byref(error))
    _lib.take_string(lib, document)
    seen = _lib.take_string(lib, error)
    assert status != 0 and seen == expected, f"the C ABI's struct: expected {expected!r}, seen status {status} and {seen!r}"


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with the checkout's package, with a timeout: a call that
    hangs (a FIFO read without end) fails the test instead of hanging it."""
    from conftest import PYTHON_DIR

    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=30, env=env)


_INSPECT_WITH_CATEGORIES = """
import sys, rlmem
try:
    rlmem.inspect(sys.argv[1], categories=sys.argv[2])
except rlmem.BadInputError as error:
    print(error)
"""


# Issue 28 item 3: categories= read any file (a FIFO blocked for ever, /dev/zero grew to GiBs).
# It is read by the CLI's reader in librlmem now, refused at once with the CLI's line.
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_categories_that_are_not_a_regular_file_are_refused_at_once_with_the_clis_line(rlmem, snapshot, cli, tmp_path, kind):
    path = snapshot("tiny_oom_cpp_stacks.pickle")
    if kind == "fifo":
        rules = tmp_path / "rules.fifo"
        os.mkfifo(rules)
    else:
        rules = Path("/dev/zero")
    code, _, err = cli("inspect", str(path), "--categories", str(rules))
    assert code == 2, f"expected the CLI to refuse {rules}, saw exit {code}: {err}"
    done = _run_python(_INSPECT_WITH_CATEGORIES, str(path), str(rules))
    assert done.returncode == 0 and done.stderr == "", f"saw exit {done.returncode}, stderr {done.stderr!r}"
    assert done.stdout == _cli_message(err) + "\n", f"CLI: {err!r}, Python: {done.stdout!r}"
    assert "not a regular file" in done.stdout


# Issue 28 item 8: a 1 MiB step marker through Python (the C ABI) is one clean error naming the
# limit, and librlmem prints nothing on standard error.
def test_a_1_mib_step_marker_is_refused_naming_the_limit_and_stderr_stays_empty(snapshot):
    done = _run_python(
        """
import sys, rlmem
try:
    rlmem.inspect(sys.argv[1], step_marker="(" * (1 << 20))
except rlmem.InvalidArgumentError as error:
    print(str(error)[:400])
""",
        str(snapshot("tiny_oom_cpp_stacks.pickle")),
    )
    assert done.stderr == "", f"expected nothing on stderr, saw {len(done.stderr)} characters: {done.stderr[:300]!r}"
    assert "a step marker is at most 4096 bytes" in done.stdout, f"saw {done.stdout!r}"


def test_bad_category_rules_are_invalid_arguments(rlmem, snapshot, tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("\n", encoding="utf-8")
    with pytest.raises(rlmem.InvalidArgumentError, match="category rules: no rules"):
        rlmem.inspect(snapshot("grpo_clean.pickle.zst"), categories=rules)


def test_errors_are_also_builtin_exceptions(rlmem):
    assert issubclass(rlmem.BadInputError, ValueError) and issubclass(rlmem.BadInputError, rlmem.RlmemError)
    assert issubclass(rlmem.InvalidArgumentError, ValueError)
    assert issubclass(rlmem.RlmemMemoryError, MemoryError)
    assert issubclass(rlmem.InternalError, RuntimeError)
    assert issubclass(rlmem.LibraryError, OSError)


def test_library_override_errors(tmp_path):
    import subprocess
    import sys

    from conftest import PYTHON_DIR

    code = ("import rlmem\n"
            "try:\n    rlmem.version()\nexcept rlmem.LibraryError as e:\n    print('ERR', e)\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PYTHON_DIR), "RLMEM_LIBRARY": str(tmp_path / "none.so")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == f"ERR RLMEM_LIBRARY={tmp_path / 'none.so'}: no such file (unset it to use the " \
                                  f"package's own librlmem.so)", done.stdout + done.stderr
    not_a_library = tmp_path / "fake.so"
    not_a_library.write_bytes(b"not an ELF file")
    env["RLMEM_LIBRARY"] = str(not_a_library)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.startswith(f"ERR {not_a_library}: cannot be loaded"), done.stdout + done.stderr


def test_import_does_not_import_torch_or_transformers():
    import subprocess
    import sys

    from conftest import PYTHON_DIR

    code = "import sys, rlmem; rlmem.version(); print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PYTHON_DIR)})
    assert done.stdout.strip() == "[]", f"import rlmem pulled in {done.stdout.strip()} ({done.stderr})"


def test_blocks_from_before_recording_are_their_own_category(rlmem, snapshot):
    # Issue 27 item 4: the library's document names them before_recording, never weights.
    result = rlmem.inspect(snapshot("grpo_clean.pickle.zst"))
    at_peak = result["categories"]["at_peak"]
    assert at_peak["before_recording"] == 159_715_328, f"expected 159,715,328, seen {at_peak['before_recording']:,}"
    assert at_peak["weights"] == 0, f"expected no weights, seen {at_peak['weights']:,}"
    assert result["categories"]["timeline"]["columns"][-1] == "before_recording"
