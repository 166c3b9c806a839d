"""inspect(), report() and version(): thin calls into librlmem.

Every rule lives in the C++ library; this module converts arguments, calls, and converts back.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Optional, Union

from . import _lib
from .errors import InvalidArgumentError, BadInputError, RLMEM_OK, error_for_status

__all__ = ["inspect", "report", "version", "library_path"]

PathOrBytes = Union[str, "os.PathLike[str]", "os.PathLike[bytes]", bytes, bytearray, memoryview]



def version() -> str:
    """The version of the loaded librlmem, ``"MAJOR.MINOR.PATCH"`` (the package's own is ``rlmem.__version__``)."""
    lib, _ = _lib.load()
    return lib.rlmem_version().decode("utf-8", "replace")


def library_path() -> str:
    """The path of the librlmem.so this process uses (see rlmem._lib for the search order)."""
    return _lib.load()[1]


def _encode_optional_text(name: str, value: Optional[str]) -> Optional[bytes]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    if "\0" in value:
        raise InvalidArgumentError(f"{name} contains a NUL character")
    return value.encode("utf-8")


def _path_bytes(name: str, path: Union[str, "os.PathLike[str]"]) -> bytes:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), not {type(path).__name__}")
    encoded = os.fsencode(path)
    if b"\0" in encoded:
        raise InvalidArgumentError(f"{os.fsdecode(encoded)!r}: a path cannot contain a NUL character")
    return encoded


def _read_category_rules(lib, categories: Union[str, "os.PathLike[str]"]) -> bytes:
    # librlmem reads the file with the CLI's reader (a regular file of at most 16 MiB; a FIFO or
    # /dev/zero is refused at once), and the message is the line the CLI prints.
    path = _path_bytes("categories", categories)
    text = ctypes.c_void_p()
    size = ctypes.c_size_t()
    error = ctypes.c_void_p()
    status = lib.rlmem_read_option_file(path, ctypes.byref(text), ctypes.byref(size), ctypes.byref(error))
    rules = _lib.take_bytes(lib, text, size.value)
    message = _lib.take_string(lib, error)
    if status != RLMEM_OK:
        name = lib.rlmem_status_name(status).decode("ascii", "replace")
        raise error_for_status(status, f"--categories {message or name}", name)
    if b"\0" in rules:
        raise InvalidArgumentError(f"--categories {os.fsdecode(path)}: contains a NUL byte")
    return rules


def _write_file(lib, output: Union[str, "os.PathLike[str]"], page: str) -> None:
    # librlmem writes as `rlmem report -o` does: a regular file replaced whole through a temporary
    # created exclusively beside it, a device or a FIFO written in place, a link followed.
    path = _path_bytes("output", output)
    data = page.encode("utf-8")
    error_number = ctypes.c_int()
    error = ctypes.c_void_p()
    status = lib.rlmem_write_file(path, data, len(data), ctypes.byref(error_number), ctypes.byref(error))
    message = _lib.take_string(lib, error)
    if status != RLMEM_OK:
        if error_number.value:
            raise OSError(error_number.value, message, os.fsdecode(path))
        name = lib.rlmem_status_name(status).decode("ascii", "replace")
        raise error_for_status(status, message or name, name)


def _checked(lib, flag: str, value: int) -> int:
    """``value`` once librlmem's check of ``flag`` (the CLI's and the C ABI's one range and
    wording) accepts it: before ctypes, which would wrap a top of 2**32 + 10 to 10."""
    error = ctypes.c_void_p()
    status = lib.rlmem_check_inspect_option(flag.encode("ascii"), str(value).encode("ascii"), ctypes.byref(error))
    message = _lib.take_string(lib, error)
    if status != RLMEM_OK:
        name = lib.rlmem_status_name(status).decode("ascii", "replace")
        raise error_for_status(status, message or name, name)
    return value


def _options(lib, device, top, step_marker, limit, categories, keep_alive: list) -> _lib.InspectOptions:
    options = _lib.InspectOptions()
    lib.rlmem_inspect_options_init(ctypes.byref(options))
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"device must be an int or None, not {type(device).__name__}")
        options.device = _checked(lib, "--device", device)
    if isinstance(top, bool) or not isinstance(top, int):
        raise TypeError(f"top must be an int, not {type(top).__name__}")
    options.top = _checked(lib, "--top", top)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be a number of bytes (int) or None, not {type(limit).__name__}")
        options.limit_bytes = _checked(lib, "--limit", limit)
    marker = _encode_optional_text("step_marker", step_marker)
    if marker:
        keep_alive.append(marker)
        options.step_marker = marker
    if categories is not None:
        rules = _read_category_rules(lib, categories)
        keep_alive.append(rules)
        options.category_rules = rules
    return options


def _call_inspect(lib, call) -> dict:
    return json.loads(_call_document(lib, call))


def _call_document(lib, call) -> str:
    """The document a librlmem call writes (JSON or HTML), or the error it reports raised."""
    document = ctypes.c_void_p()
    error = ctypes.c_void_p()
    status = call(ctypes.byref(document), ctypes.byref(error))
    text = _lib.take_string(lib, document)
    message = _lib.take_string(lib, error)
    if status != RLMEM_OK:
        name = lib.rlmem_status_name(status).decode("ascii", "replace")
        raise error_for_status(status, message or name, name)
    if text is None:
        raise error_for_status(-4, "internal error: librlmem returned success without a document", "RLMEM_E_INTERNAL")
    return text


def inspect(
    snapshot: PathOrBytes,
    *,
    device: Optional[int] = None,
    top: int = 10,
    step_marker: Optional[str] = None,
    limit: Optional[int] = None,
    categories: Union[str, "os.PathLike[str]", None] = None,
) -> dict[str, Any]:
    """Inspects a PyTorch memory snapshot and returns ``rlmem inspect --json``'s document.

    ``snapshot`` is a path (str or PathLike) of what ``torch.cuda.memory._dump_snapshot`` wrote,
    plain, gzip or zstd (detected from the content), or the snapshot's bytes themselves (bytes,
    bytearray, memoryview). Nothing in the pickle is executed: opcodes that would import or call
    code are refused with :class:`BadInputError`.

    The options are the CLI's flags: ``device`` (--device; None: the device with the longest
    trace), ``top`` (--top: sites listed at the peak), ``step_marker`` (--step-marker: a regular
    expression on frames ``"path:line function"`` that starts each step), ``limit`` (--limit:
    the memory limit in bytes for OOM verdicts; None: bounded from the trace), ``categories``
    (--categories: a rules file replacing the built-in category table, read by the CLI's reader:
    a regular file of at most 16 MiB; a FIFO or a device is refused with :class:`BadInputError`).

    The result follows docs/schema/inspect.schema.json; the parts most used::

        report = rlmem.inspect("snapshot.pickle")
        report["summary"]["peak_allocated_bytes"]      # the peak, bytes
        report["peak"]["by_site"][0]["site"]           # what held most at the peak
        for leak in report["leaks"]:                   # one per cause, fastest first
            print(leak["site"], leak["bytes_per_step"], leak["first_step"])
            for line in leak["lines"]:                 # the lines of one function it covers
                print("  ", line["site"], line["bytes_per_step"])
        report["leak_summary"]["explained_fraction"]   # share of the step-end growth they explain
        for oom in report["oom"]:                      # one verdict per OOM event
            print(oom["verdict"], oom["requested_bytes"], oom["advice"])

    Raises :class:`BadInputError` (unreadable or malformed snapshot, missing file),
    :class:`InvalidArgumentError` (bad options, a device the file does not have), both
    ``ValueError``s, with the message the CLI prints after ``rlmem:``.
    """
    lib, _ = _lib.load()
    keep_alive: list = []
    options = _options(lib, device, top, step_marker, limit, categories, keep_alive)
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        data, size = _buffer_of(snapshot, keep_alive)
        return _call_inspect(lib, lambda out, err: lib.rlmem_inspect_bytes(data, size, ctypes.byref(options), out, err))
    if isinstance(snapshot, (str, os.PathLike)):
        path = os.fsencode(snapshot)
        if b"\0" in path:
            raise InvalidArgumentError(f"{os.fsdecode(path)!r}: a path cannot contain a NUL character")
        return _call_inspect(lib, lambda out, err: lib.rlmem_inspect_file(path, ctypes.byref(options), out, err))
    raise TypeError(f"snapshot must be a path (str, os.PathLike) or bytes-like, not {type(snapshot).__name__}")


def report(
    snapshot: PathOrBytes,
    output: Union[str, "os.PathLike[str]", None] = None,
    *,
    device: Optional[int] = None,
    top: int = 10,
    step_marker: Optional[str] = None,
    limit: Optional[int] = None,
    categories: Union[str, "os.PathLike[str]", None] = None,
) -> str:
    """``rlmem report``: the self-contained HTML page of a snapshot (timeline, active memory, the
    peak, leaks, fragmentation and segments, OOM verdicts with their proofs), offline by design.

    ``snapshot`` and the options are :func:`inspect`'s. Returns the page; with ``output``, also
    writes it there as ``rlmem report -o`` does: a regular file whole or not at all (written to a
    temporary of a unique name beside it, then renamed over it), a device or a FIFO in place, a
    symbolic link followed to its target::

        rlmem.report("snapshot.pickle", "snapshot.html")

    Raises what :func:`inspect` raises, :class:`InternalError` when librlmem was built without the
    page's browser assets, and ``OSError`` when ``output`` cannot be written (its message the
    CLI's line, "cannot write PATH: ...").
    """
    lib, _ = _lib.load()
    keep_alive: list = []
    options = _options(lib, device, top, step_marker, limit, categories, keep_alive)
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        data, size = _buffer_of(snapshot, keep_alive)
        page = _call_document(lib, lambda out, err: lib.rlmem_report_bytes(data, size, ctypes.byref(options), out, err))
    elif isinstance(snapshot, (str, os.PathLike)):
        path = os.fsencode(snapshot)
        if b"\0" in path:
            raise InvalidArgumentError(f"{os.fsdecode(path)!r}: a path cannot contain a NUL character")
        page = _call_document(lib, lambda out, err: lib.rlmem_report_file(path, ctypes.byref(options), out, err))
    else:
        raise TypeError(f"snapshot must be a path (str, os.PathLike) or bytes-like, not {type(snapshot).__name__}")
    if output is not None:
        _write_file(lib, output, page)
    return page


def _buffer_of(snapshot, keep_alive: list):
    """A pointer the C call can read and the size, without copying where Python allows it."""
    if isinstance(snapshot, bytes):
        return snapshot, len(snapshot)
    view = memoryview(snapshot)
    if not view.c_contiguous:
        data = view.tobytes()
        return data, len(data)
    view = view.cast("B")
    size = view.nbytes
    if size == 0:
        return b"", 0
    if view.readonly:
        data = view.tobytes()  # ctypes cannot point into a read-only buffer without a copy
        return data, size
    array = (ctypes.c_char * size).from_buffer(view)
    keep_alive.append(array)
    return ctypes.cast(array, ctypes.c_void_p), size
