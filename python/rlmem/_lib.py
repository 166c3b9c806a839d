"""Finding and loading librlmem.so, and the ctypes declarations of include/rlmem/rlmem.h.

Where the library is looked for, first match wins:

1. ``$RLMEM_LIBRARY``: the path of a librlmem.so (an error if it does not exist);
2. ``librlmem.so`` next to this file: an installed package (``pip install ./python`` copies it);
3. ``build/librlmem.so`` of the checkout this package sits in (``PYTHONPATH=python`` after
   ``make build``).

The loaded library is the package's only cached state; it is thread-safe (the C ABI keeps no
global mutable state, but for the runtime's per-device allocators, which take their own locks).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

from .errors import InvalidArgumentError, LibraryError

LIBRARY_NAME = "librlmem.so"

_lock = threading.Lock()
_loaded: tuple[ctypes.CDLL, str] | None = None


class InspectOptions(ctypes.Structure):
    """rlmem_inspect_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int64),
        ("top", ctypes.c_uint32),
        ("step_marker", ctypes.c_char_p),
        ("limit_bytes", ctypes.c_int64),
        ("category_rules", ctypes.c_char_p),
        ("source_name", ctypes.c_char_p),
    ]


class LeakVerdictStruct(ctypes.Structure):
    """rlmem_leak_verdict."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("leaking", ctypes.c_int),
        ("first_step", ctypes.c_uint64),
        ("steps", ctypes.c_uint64),
        ("bytes_per_step", ctypes.c_int64),
        ("stopped", ctypes.c_int),
        ("last_event", ctypes.c_uint64),
        ("events", ctypes.c_uint64),
        ("period", ctypes.c_uint64),
        ("noise_bytes", ctypes.c_int64),
        ("level_bytes", ctypes.c_int64),
        ("z", ctypes.c_double),
        ("kendall_z", ctypes.c_double),
    ]


class StepSampleStruct(ctypes.Structure):
    """rlmem_step_sample."""

    _fields_ = [(name, ctypes.c_int64) for name in (
        "step", "allocated", "reserved", "inactive_split", "step_peak_allocated", "step_peak_reserved",
        "allocations", "num_alloc_retries", "num_ooms", "device_free", "device_total", "limit")]


class StepRulesStruct(ctypes.Structure):
    """rlmem_step_rules."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("leak_window", ctypes.c_uint64),
        ("leak_min_z", ctypes.c_double),
        ("leak_min_events", ctypes.c_uint64),
        ("leak_min_relative_rate", ctypes.c_double),
        ("leak_min_bytes_per_step", ctypes.c_int64),
        ("leak_stop_after_periods", ctypes.c_double),
        ("fragmentation_bytes", ctypes.c_int64),
        ("fragmentation_fraction", ctypes.c_double),
        ("fragmentation_window", ctypes.c_uint64),
        ("headroom_fraction", ctypes.c_double),
        ("headroom_steps", ctypes.c_int64),
    ]


class StepJudgmentStruct(ctypes.Structure):
    """rlmem_step_judgment."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("leak", LeakVerdictStruct),
        ("leak_count_before", ctypes.c_int64),
        ("peak_allocated_seen", ctypes.c_int64),
        ("unused_reserved", ctypes.c_int64),
        ("fragmented", ctypes.c_int),
        ("fragmentation", ctypes.c_int),
        ("fragmentation_growth", ctypes.c_int64),
        ("fragmentation_steps", ctypes.c_uint64),
        ("alloc_retries", ctypes.c_int),
        ("new_alloc_retries", ctypes.c_int64),
        ("headroom", ctypes.c_int),
        ("outside_bytes", ctypes.c_int64),
        ("limit_bytes", ctypes.c_int64),
        ("free_at_peak", ctypes.c_int64),
        ("steps_to_limit", ctypes.c_int64),
        ("oom", ctypes.c_int),
        ("new_ooms", ctypes.c_int64),
    ]


class RuntimeOptions(ctypes.Structure):
    """rlmem_runtime_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("capacity_bytes", ctypes.c_uint64),
        ("release_free_pages", ctypes.c_int),
        ("reservation_bytes", ctypes.c_uint64),
        ("copy_chunk_bytes", ctypes.c_uint64),
        ("keep_host_buffers", ctypes.c_int),
        ("history_entries", ctypes.c_uint64),
    ]


#: The values each C integer type of the ABI holds. ctypes converts anything else silently
#: modulo the type's width (2**64 passed as uint64_t arrives as 0, 2**32 as int as 0), so every
#: integer is checked against its type's range before a call: see :func:`whole_number`.
C_INT = (-(2**31), 2**31 - 1)
UINT32 = (0, 2**32 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
SIZE_T = (0, 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1)


def whole_number(name: str, value: Any, bounds: tuple[int, int], out_of_range: str | None = None) -> int:
    """``value`` as an int within ``bounds`` (low, high: the C type's range, or narrower), for a
    ctypes call that would otherwise wrap it.

    ``TypeError`` for what is not a number (a bool, a string, None); :class:`InvalidArgumentError`
    for a number that is not whole (1.5), and outside the bounds, with ``out_of_range`` as its
    message (the CLI's or the C library's wording for the same value, where one exists) or else
    "<name> = <value> is outside [<low>, <high>]".
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} is a bool, not a number")
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} is {value!r}, not an integer")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} is {value!r}, not an integer") from None
    if number != value:
        raise InvalidArgumentError(f"{name} = {value!r} is not a whole number")
    low, high = bounds
    if not low <= number <= high:
        raise InvalidArgumentError(out_of_range if out_of_range is not None else f"{name} = {number} is outside [{low}, {high}]")
    return number


_BOUNDS_OF_TYPE = {ctypes.c_int: C_INT, ctypes.c_uint32: UINT32, ctypes.c_int64: INT64, ctypes.c_uint64: UINT64,
                   ctypes.c_size_t: SIZE_T}


def checked_arguments(name: str, function: Any, args: tuple) -> tuple:
    """``args`` for ``function`` (a declared librlmem function named ``name``), each Python int
    checked by :func:`whole_number` against the range of the C type it is declared as: what a
    caller did not check with its own wording is still never wrapped."""
    for position, (value, ctype) in enumerate(zip(args, function.argtypes), start=1):
        bounds = _BOUNDS_OF_TYPE.get(ctype)
        if bounds is not None and isinstance(value, int):
            whole_number(f"{name}: argument {position}", value, bounds)
    return args


def candidate_paths() -> list[Path]:
    """Where librlmem.so is looked for, in order (RLMEM_LIBRARY, the package, the checkout)."""
    here = Path(__file__).resolve().parent
    paths = []
    override = os.environ.get("RLMEM_LIBRARY")
    if override:
        paths.append(Path(override))
    paths.append(here / LIBRARY_NAME)
    paths.append(here.parent.parent / "build" / LIBRARY_NAME)
    return paths


def _find() -> Path:
    override = os.environ.get("RLMEM_LIBRARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise LibraryError(f"RLMEM_LIBRARY={override}: no such file (unset it to use the package's own librlmem.so)")
        return path
    for path in candidate_paths():
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidate_paths())
    raise LibraryError(
        f"{LIBRARY_NAME} not found (looked in: {looked}); build it with `make build` in the rlmem checkout, "
        f"or set RLMEM_LIBRARY to its path"
    )


def _declare(lib: ctypes.CDLL) -> None:
    lib.rlmem_version.argtypes = []
    lib.rlmem_version.restype = ctypes.c_char_p
    lib.rlmem_status_name.argtypes = [ctypes.c_int]
    lib.rlmem_status_name.restype = ctypes.c_char_p
    # Returned strings are received as void pointers: they must go back to rlmem_string_free.
    lib.rlmem_string_free.argtypes = [ctypes.c_void_p]
    lib.rlmem_string_free.restype = None
    lib.rlmem_inspect_options_init.argtypes = [ctypes.POINTER(InspectOptions)]
    lib.rlmem_inspect_options_init.restype = None
    lib.rlmem_check_inspect_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_check_inspect_option.restype = ctypes.c_int
    lib.rlmem_inspect_file.argtypes = [ctypes.c_char_p, ctypes.POINTER(InspectOptions),
                                       ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_inspect_file.restype = ctypes.c_int
    lib.rlmem_inspect_bytes.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(InspectOptions),
                                        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_inspect_bytes.restype = ctypes.c_int
    lib.rlmem_report_file.argtypes = [ctypes.c_char_p, ctypes.POINTER(InspectOptions),
                                      ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_report_file.restype = ctypes.c_int
    lib.rlmem_report_bytes.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(InspectOptions),
                                       ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_report_bytes.restype = ctypes.c_int
    lib.rlmem_read_option_file.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                                           ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_read_option_file.restype = ctypes.c_int
    lib.rlmem_write_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int),
                                     ctypes.POINTER(ctypes.c_void_p)]
    lib.rlmem_write_file.restype = ctypes.c_int
    lib.rlmem_leak_check.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64),
                                     ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(LeakVerdictStruct)]
    lib.rlmem_leak_check.restype = ctypes.c_int
    lib.rlmem_judge_step.argtypes = [ctypes.POINTER(StepSampleStruct), ctypes.c_size_t, ctypes.c_int64,
                                     ctypes.POINTER(StepRulesStruct), ctypes.POINTER(StepJudgmentStruct)]
    lib.rlmem_judge_step.restype = ctypes.c_int
    lib.rlmem_judge_imbalance.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_double,
                                          ctypes.c_int64, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_size_t),
                                          ctypes.POINTER(ctypes.c_size_t)]
    lib.rlmem_judge_imbalance.restype = ctypes.c_int
    _declare_runtime(lib)


def _declare_runtime(lib: ctypes.CDLL) -> None:
    """rlmem_runtime.h: every runtime call returns a status and takes char** error_out last."""
    error = ctypes.POINTER(ctypes.c_void_p)
    u64 = ctypes.c_uint64
    signatures = {
        "rlmem_runtime_configure": [ctypes.POINTER(RuntimeOptions), error],
        "rlmem_runtime_open_cuda": [ctypes.c_int, ctypes.POINTER(RuntimeOptions), error],
        "rlmem_runtime_open_fake": [ctypes.c_int, u64, u64, ctypes.POINTER(RuntimeOptions), error],
        "rlmem_runtime_allocate": [ctypes.c_int, u64, u64, ctypes.POINTER(u64), error],
        "rlmem_runtime_free": [ctypes.c_int, u64, error],
        "rlmem_runtime_enter_region": [ctypes.c_int, ctypes.c_char_p, error],
        "rlmem_runtime_leave_region": [ctypes.c_int, error],
        "rlmem_runtime_pause": [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, error],
        "rlmem_runtime_resume": [ctypes.c_int, ctypes.c_char_p, error],
        "rlmem_runtime_empty_cache": [ctypes.c_int, error],
        "rlmem_runtime_release_host_buffers": [ctypes.c_int, error],
        "rlmem_runtime_reserve_host_buffers": [ctypes.c_int, u64, error],
        "rlmem_runtime_reset_peaks": [ctypes.c_int, error],
        "rlmem_runtime_growable_reserve": [ctypes.c_int, u64, ctypes.POINTER(u64), error],
        "rlmem_runtime_grow": [ctypes.c_int, u64, u64, ctypes.POINTER(u64), error],
        "rlmem_runtime_growable_release": [ctypes.c_int, u64, error],
        "rlmem_runtime_read": [ctypes.c_int, u64, ctypes.c_void_p, u64, error],
        "rlmem_runtime_write": [ctypes.c_int, u64, ctypes.c_void_p, u64, error],
        "rlmem_runtime_statistics_json": [ctypes.c_int, error, error],
        "rlmem_runtime_snapshot_json": [ctypes.c_int, error, error],
        "rlmem_runtime_release_graph_memory": [ctypes.c_int, ctypes.c_char_p, error],
        "rlmem_runtime_blocks_still_filled_json": [ctypes.c_int, ctypes.c_char_p, error, error],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = ctypes.c_int
    lib.rlmem_runtime_options_init.argtypes = [ctypes.POINTER(RuntimeOptions)]
    lib.rlmem_runtime_options_init.restype = None
    lib.rlmem_runtime_close.argtypes = [ctypes.c_int]
    lib.rlmem_runtime_close.restype = ctypes.c_int
    lib.rlmem_runtime_is_open.argtypes = [ctypes.c_int]
    lib.rlmem_runtime_is_open.restype = ctypes.c_int
    lib.rlmem_torch_prepare_libraries.argtypes = [ctypes.c_int, ctypes.c_void_p, error]
    lib.rlmem_torch_prepare_libraries.restype = ctypes.c_int


def _major_minor(version: str) -> tuple[int, int] | None:
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def _check_abi(path: Path, library_version: str) -> None:
    """The library must speak the C ABI of the tree this package comes from: the same
    MAJOR.MINOR (librlmem's SONAME), read from CMakeLists.txt through rlmem._version."""
    from ._version import package_version  # noqa: PLC0415

    speaks = _major_minor(library_version)
    if speaks is None:
        raise LibraryError(f"{path}: reports version {library_version!r}, not MAJOR.MINOR.PATCH")
    package = package_version()
    if package is None:
        raise LibraryError(f"{path}: cannot tell which librlmem ABI this package speaks (no stamp of an installed package, "
                           f"no CMakeLists.txt of a checkout beside it): reinstall it with `pip install ./python`")
    if speaks != _major_minor(package):
        raise LibraryError(
            f"{path} is librlmem {library_version}; this rlmem package ({package}) speaks the "
            f"{'.'.join(package.split('.')[:2])} ABI: rebuild the library (`make build`) or reinstall the package from "
            f"the same checkout"
        )


def load() -> tuple[ctypes.CDLL, str]:
    """The loaded library and its path (loaded once per process)."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        path = _find()
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as error:
            raise LibraryError(f"{path}: cannot be loaded: {error}") from None
        try:
            _declare(lib)
        except AttributeError as error:
            raise LibraryError(f"{path}: not a librlmem this package can use ({error})") from None
        _check_abi(path, lib.rlmem_version().decode("utf-8", "replace"))
        _loaded = (lib, str(path))
        return _loaded


def take_bytes(lib: ctypes.CDLL, pointer: ctypes.c_void_p, size: int) -> bytes:
    """Copies `size` bytes the library returned into Python and frees them (NULL gives b"")."""
    if not pointer.value:
        return b""
    try:
        return ctypes.string_at(pointer.value, size)
    finally:
        lib.rlmem_string_free(pointer)


def take_string(lib: ctypes.CDLL, pointer: ctypes.c_void_p) -> str | None:
    """Copies a library-owned C string into Python and frees it (NULL gives None)."""
    if not pointer.value:
        return None
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        lib.rlmem_string_free(pointer)
