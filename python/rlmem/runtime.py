"""The rlmem runtime: a CUDA virtual-memory allocator for PyTorch, with tags, pause and resume.

Process-wide (every CUDA tensor of the process; call before anything touches CUDA)::

    import rlmem.runtime as rt
    rt.install()                      # torch.cuda.memory.change_current_allocator under the hood
    with rt.region("rollout"):        # what is allocated here belongs to the tag "rollout"
        kv = torch.empty(...)
    rt.pause("train", keep="host")    # the tag's device memory goes back; addresses stay valid
    ...                               # the rollout uses the memory
    rt.resume("train")                # same addresses, contents restored bit-exact

Under this route torch's ``memory_allocated``, ``memory_reserved``, ``memory_stats`` and their
peaks answer from rlmem (``rlmem._torch_stats``); torch's history calls raise (its pluggable
allocator has none: :func:`dump_snapshot` stands in). :func:`statistics` adds the figures per
tag. A request the device cannot serve raises at the call, with rlmem's reason (see
:func:`install`). Memory torch keeps for its libraries (cuBLAS and cuBLASLt workspaces, made on
a stream's first GEMM) goes to the tag ``"libraries"``, never paused, whatever region is open;
blocks a CUDA graph capture allocated stay until :func:`release_graph_memory`, so a graph replays
after a pause of its tag. ``RLMEM_CHECK_PAUSED=1`` in the environment is the checking mode: paused
memory reads as NaN bytes instead of faulting, writes into it are counted (``resume`` warns), a
discarded tag comes back as NaN bytes, and :func:`blocks_still_filled` names what was never
written again.

With torch's own allocator kept (stats, snapshots and ``torch.OutOfMemoryError`` as usual),
:func:`pool` routes one region's segments to rlmem through ``torch.cuda.MemPool``; torch still
caches and splits blocks inside it, so never allocate in a pool's region while its tag is paused.

Every call goes through librlmem's C ABI (include/rlmem/rlmem_runtime.h); the rules live there.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import threading
import warnings
import types
import weakref
from typing import Any, Iterator, Optional

from . import _lib, _torch, _torch_stats
from .errors import RLMEM_E_STATE, InvalidArgumentError, RuntimeStateError, error_for_status

__all__ = [
    "install",
    "installed",
    "history_entries",
    "region",
    "prepare_libraries",
    "pause",
    "resume",
    "empty_cache",
    "statistics",
    "memory_stats",
    "reset_peak_memory_stats",
    "release_host_buffers",
    "reserve_host_buffers",
    "pool",
    "release_graph_memory",
    "blocks_still_filled",
    "GrowableBuffer",
    "snapshot",
    "dump_snapshot",
]

_state_lock = threading.Lock()
_installed = False
_history_entries = 0
_pools: dict[tuple[str, int], Any] = {}
_pool_allocator: Any = None
_prepared = threading.local()  # .streams: the (device, stream) pairs this thread prepared


def _check(lib: ctypes.CDLL, status: int, error: ctypes.c_void_p) -> None:
    message = _lib.take_string(lib, error)
    if status != 0:
        name = lib.rlmem_status_name(status).decode()
        raise error_for_status(status, message or name, name)


def _call(name: str, *args: Any) -> None:
    lib, _ = _lib.load()
    error = ctypes.c_void_p()
    function = getattr(lib, name)
    status = function(*_lib.checked_arguments(name, function, args), ctypes.byref(error))
    _check(lib, status, error)


def _document(name: str, device: Optional[int], *args: Any) -> Any:
    """The JSON document a runtime call returns (after the device and `args`), as Python objects."""
    lib, _ = _lib.load()
    document = ctypes.c_void_p()
    error = ctypes.c_void_p()
    function = getattr(lib, name)
    status = function(*_lib.checked_arguments(name, function, (_device(device), *args)), ctypes.byref(document), ctypes.byref(error))
    text = _lib.take_string(lib, document)
    _check(lib, status, error)
    return json.loads(text)


def _options(capacity: Optional[int], release_free_pages: bool, copy_chunk_bytes: Optional[int],
             keep_host_buffers: bool = False, history: int = 0) -> _lib.RuntimeOptions:
    lib, _ = _lib.load()
    options = _lib.RuntimeOptions()
    lib.rlmem_runtime_options_init(ctypes.byref(options))
    if capacity is not None:
        options.capacity_bytes = _lib.whole_number("capacity", capacity, (1, _lib.UINT64[1]),
                                                   f"capacity must be a positive number of bytes up to 2**64 - 1, not {capacity!r}")
    options.release_free_pages = 1 if release_free_pages else 0
    if copy_chunk_bytes is not None:
        options.copy_chunk_bytes = _lib.whole_number("copy_chunk_bytes", copy_chunk_bytes, _lib.UINT64)
    options.keep_host_buffers = 1 if keep_host_buffers else 0
    options.history_entries = _lib.whole_number("history", history, _lib.UINT64,
                                                f"history must be a number of events (0: none) up to 2**64 - 1, not {history!r}")
    return options


def _device(device: Optional[int]) -> int:
    if device is not None:
        # The C library's wording for an ordinal it does not take.
        return _lib.whole_number("device", device, _lib.C_INT, f"device {device} is out of range")
    torch = _torch.require_cuda("rlmem.runtime's current device (device=None)", "2.0")
    return int(torch.cuda.current_device())


def _tag_name(tag: Any) -> bytes:
    """``tag`` as the C ABI takes it. The C string ends at its first NUL, so a name holding one
    would name another tag ("a\\0b" is "a"): refused."""
    if not isinstance(tag, str):
        raise TypeError(f"a tag name is a str, not {type(tag).__name__}")
    if "\0" in tag:
        raise InvalidArgumentError(f"tag name {tag!r} contains a NUL character")
    return tag.encode()


def _ensure_open(device: int) -> None:
    lib, _ = _lib.load()
    if not lib.rlmem_runtime_is_open(device):
        # Opened as a first allocation would open it, with install()'s options.
        _call("rlmem_runtime_open_cuda", device, None)


def _function_address(name: str) -> int:
    lib, _ = _lib.load()
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def install(*, capacity: Optional[int] = None, release_free_pages: bool = False,
            keep_host_buffers: bool = False, history: int = 0, copy_chunk_bytes: Optional[int] = None) -> None:
    """Makes rlmem the CUDA allocator of this process (every device; each opens on first use).

    Must run before the first CUDA allocation (torch refuses to change an allocator in use).
    ``capacity``: most bytes rlmem maps per device (a memory fraction, in bytes).
    ``release_free_pages``: unmap pages as soon as no tensor uses them (memory closest to what
    is live, at a fence and a map per reuse); otherwise free pages stay mapped until memory runs
    short or :func:`empty_cache`.
    ``keep_host_buffers``: keep the pinned host memory of a ``keep="host"`` backup after resume,
    for the next pause. Pinning runs at ~1 GB/s and the copies at ~50 GB/s, so a loop that
    pauses every step wants it; :func:`release_host_buffers` gives the memory back.
    ``history``: keep the last this many allocator events for :func:`dump_snapshot` (torch's
    ``_record_memory_history`` raises under this route); 0 keeps none; at most 2**24 (48 bytes
    an event, reserved when a device's runtime opens).

    Needs PyTorch 2.0 or later built with CUDA, and a CUDA device: without them a
    :class:`rlmem.DeviceError` says which is missing.

    A request the device cannot serve raises ``torch.OutOfMemoryError`` at the call, its message
    starting "CUDA out of memory (rlmem runtime)", never a null tensor: librlmem throws torch's
    own ``c10::OutOfMemoryError``, found in the process at run time (with a torch whose c10 lacks
    it, a ``RuntimeError`` with the same message).
    """
    global _installed, _history_entries
    torch = _torch.require_cuda("rlmem.runtime.install()", "2.0", _has_pluggable_allocator)

    with _state_lock:
        if _installed:
            raise RuntimeStateError("rlmem.runtime.install(): rlmem is the allocator of this process already")
        options = _options(capacity, release_free_pages, copy_chunk_bytes, keep_host_buffers, history)
        _call("rlmem_runtime_configure", ctypes.byref(options))
        allocator = torch._C._cuda_customAllocator(_function_address("rlmem_torch_malloc"), _function_address("rlmem_torch_free"))
        try:
            torch.cuda.memory.change_current_allocator(torch.cuda.memory._CUDAAllocator(allocator))
        except RuntimeError as error:
            raise RuntimeStateError(
                f"rlmem.runtime.install() must run before the first CUDA allocation of the process ({error})"
            ) from None
        _installed = True
        _history_entries = int(history)
        _torch_stats.enable()  # torch.cuda.memory_allocated() & co. answered by rlmem (docs/runtime-compat.md)


def _has_pluggable_allocator(torch: Any) -> bool:
    """torch.cuda.memory.CUDAPluggableAllocator's machinery (PyTorch 2.0 on)."""
    return hasattr(torch._C, "_cuda_customAllocator") and hasattr(torch.cuda.memory, "change_current_allocator")


def _has_memory_pools(torch: Any) -> bool:
    """torch.cuda.MemPool and use_mem_pool (PyTorch 2.5 on) over the pluggable allocator."""
    return _has_pluggable_allocator(torch) and hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def installed() -> bool:
    """Whether :func:`install` made rlmem the process's allocator."""
    return _installed


def history_entries() -> int:
    """How many allocator events :func:`install` keeps for :func:`dump_snapshot` (0: none).
    :class:`rlmem.record` writes those snapshots under this route."""
    return _history_entries


@contextlib.contextmanager
def region(tag: str, device: Optional[int] = None) -> Iterator[None]:
    """Allocations inside (every thread, autograd's included) belong to ``tag``; regions nest."""
    if not isinstance(tag, str) or not tag:
        raise InvalidArgumentError("a region needs a tag name (a non-empty string)")
    name = _tag_name(tag)
    ordinal = _device(device)
    _ensure_open(ordinal)
    torch = sys.modules.get("torch")
    if _installed and torch is not None and torch.cuda.is_available():
        _prepare_current_stream(ordinal)
    _call("rlmem_runtime_enter_region", ordinal, name)
    try:
        yield
    finally:
        _call("rlmem_runtime_leave_region", ordinal)


def prepare_libraries(device: Optional[int] = None) -> bool:
    """Makes now, outside any region, the memory torch's libraries keep for the calling thread on
    the current stream of ``device``: the cuBLAS and cuBLASLt workspaces its first GEMM there
    would make, by torch's own getters. They go to the tag ``"libraries"``, never paused, and the
    thread's later requests on that stream are never looked at again (otherwise those of a
    workspace's size each cost a few microseconds of stack reading). :func:`region` calls it for
    the current stream; call it for a side stream before its first region, or in a loop that
    pauses ``"default"`` without regions. False where this torch lacks the getters: requests are
    then still told apart by the functions that make them.
    """
    if not _installed:
        raise RuntimeStateError("rlmem.runtime.prepare_libraries() needs rlmem as the allocator: call install() first")
    return _prepare_current_stream(_device(device))


def _prepare_current_stream(ordinal: int) -> bool:
    torch = sys.modules["torch"]
    stream = torch.cuda.current_stream(ordinal).cuda_stream
    streams = getattr(_prepared, "streams", None)
    if streams is None:
        streams = _prepared.streams = set()
    if (ordinal, stream) in streams:
        return True
    lib, _ = _lib.load()
    error = ctypes.c_void_p()
    with torch.cuda.device(ordinal):
        status = lib.rlmem_torch_prepare_libraries(ordinal, ctypes.c_void_p(stream), ctypes.byref(error))
    message = _lib.take_string(lib, error)
    if status not in (0, RLMEM_E_STATE):
        raise error_for_status(status, message, lib.rlmem_status_name(status).decode())
    streams.add((ordinal, stream))
    return status == 0


def pause(tag: str, keep: str = "discard", device: Optional[int] = None) -> None:
    """Releases the device memory of ``tag``; its tensors keep their addresses (and CUDA graphs
    their pointers) but must not be touched until :func:`resume`.

    ``keep="host"`` copies the contents to pinned host memory first (restored bit-exact by
    resume, then freed); ``keep="discard"`` drops them (resume fills zeros). The device is
    synchronized first. Allocating in a paused tag raises; freeing its tensors is fine.
    """
    if keep not in ("discard", "host"):
        raise InvalidArgumentError(f'keep must be "discard" or "host", not {keep!r}')
    name = _tag_name(tag)
    ordinal = _device(device)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
        raise RuntimeStateError(f"pause({tag!r}) during a CUDA graph capture: the capture cannot fence the device; "
                                "pause before or after it")
    _call("rlmem_runtime_pause", ordinal, name, 1 if keep == "host" else 0)


def resume(tag: str, device: Optional[int] = None) -> None:
    """Maps memory again at the tag's addresses and restores (or zero-fills) the contents. If
    the device has too little free memory, nothing changes and the tag stays paused. In the
    checking mode, warns (``RuntimeWarning``) when the tag's memory was written while paused."""
    name = _tag_name(tag)
    ordinal = _device(device)
    checking = os.environ.get("RLMEM_CHECK_PAUSED") == "1"
    before = _writes_while_paused(ordinal, tag) if checking else 0
    _call("rlmem_runtime_resume", ordinal, name)
    if checking and _writes_while_paused(ordinal, tag) > before:
        warnings.warn(f"rlmem: tag {tag!r} was written while paused (a kernel used its tensors between pause and "
                      "resume); its contents are restored from before the pause", RuntimeWarning, stacklevel=2)


def _writes_while_paused(ordinal: int, tag: str) -> int:
    for each in statistics(ordinal)["tags"]:
        if each["name"] == tag:
            return int(each.get("writes_while_paused", 0))
    return 0


def release_graph_memory(tag: Optional[str] = None, device: Optional[int] = None) -> None:
    """Frees the blocks CUDA graph captures allocated that the program has freed since (``tag``,
    or every tag): rlmem keeps them because every replay of the graph still uses them, as torch
    keeps a graph's private pool. Call it once those graphs are gone."""
    _call("rlmem_runtime_release_graph_memory", _device(device), None if tag is None else _tag_name(tag))


def blocks_still_filled(tag: str, tensors: Optional[dict] = None, device: Optional[int] = None) -> list:
    """The live blocks of ``tag`` whose every byte is still what a discarded tag's resume filled
    in (0xFF NaN bytes in the checking mode, ``RLMEM_CHECK_PAUSED=1``; zeros otherwise, where a
    real zero tensor also matches): memory discarded and never written since, such as weights not
    loaded again. Gives ``[(address, size)]``; with ``tensors`` (a name -> tensor mapping, such
    as ``dict(model.named_parameters())``), the names of the tensors inside those blocks."""
    listed = _document("rlmem_runtime_blocks_still_filled_json", device, _tag_name(tag))
    blocks = [(int(each["address"]), int(each["size"])) for each in listed]
    if tensors is None:
        return blocks
    named = []
    for name, tensor in tensors.items():
        start = tensor.data_ptr()
        if any(address <= start < address + size for address, size in blocks):
            named.append(name)
    return named


def empty_cache(device: Optional[int] = None) -> None:
    """Unmaps every page no tensor uses (what ``torch.cuda.empty_cache()`` does for torch's cache)."""
    _call("rlmem_runtime_empty_cache", _device(device))


def reserve_host_buffers(nbytes: int, device: Optional[int] = None) -> None:
    """Pins host memory now for a later ``pause(keep="host")`` of up to ``nbytes``: pinning runs
    at ~2 GB/s against ~50 GB/s for the copies, so a pause that must pin as it goes is slow.
    Call it at startup with ``install(keep_host_buffers=True)`` and every pause and resume runs
    at the copies' speed. More than a pause could ever back up (the smaller of ``capacity``, else
    the device's memory, and half the host's physical memory) raises
    :class:`InvalidArgumentError` naming the bound, with nothing pinned."""
    _call("rlmem_runtime_reserve_host_buffers", _device(device), _lib.whole_number("nbytes", nbytes, _lib.UINT64))


def release_host_buffers(device: Optional[int] = None) -> None:
    """Frees the pinned host memory kept for the next pause (``install(keep_host_buffers=True)``)."""
    _call("rlmem_runtime_release_host_buffers", _device(device))


def reset_peak_memory_stats(device: Optional[int] = None) -> None:
    """Every peak back to its current value, as ``torch.cuda.reset_peak_memory_stats``."""
    _call("rlmem_runtime_reset_peaks", _device(device))


def statistics(device: Optional[int] = None) -> dict:
    """rlmem's figures: ``{"tags": [{"name", "paused", "allocated_bytes": {"current", "peak",
    "total"}, "allocations", "mapped_bytes", "paused_bytes", "host_backup_bytes", "pauses",
    "resumes", "failed_allocations", "last_pause": {"copied_bytes", "seconds"},
    "last_resume"}], "totals": {"allocated_bytes", "allocations", "reserved_bytes",
    "alloc_retries", "ooms", "host_buffer_bytes"}}``."""
    return _document("rlmem_runtime_statistics_json", device)


def memory_stats(device: Optional[int] = None) -> dict[str, int]:
    """``torch.cuda.memory_stats()``'s keys from rlmem's counters, for code (and the step
    monitor) that reads them while torch's raise under :func:`install`.

    rlmem keeps no split blocks (a free page goes back whole), so inactive-split bytes are 0,
    and frees complete at once, so active equals allocated.
    """
    totals = statistics(device)["totals"]
    stats: dict[str, int] = {}

    def counter(prefix: str, figures: dict) -> None:
        stats[f"{prefix}.all.current"] = figures["current"]
        stats[f"{prefix}.all.peak"] = figures["peak"]
        stats[f"{prefix}.all.allocated"] = figures["total"]
        stats[f"{prefix}.all.freed"] = figures["total"] - figures["current"]

    counter("allocated_bytes", totals["allocated_bytes"])
    counter("active_bytes", totals["allocated_bytes"])
    counter("requested_bytes", totals["allocated_bytes"])
    counter("reserved_bytes", totals["reserved_bytes"])
    counter("allocation", totals["allocations"])
    counter("active", totals["allocations"])
    for prefix in ("inactive_split_bytes", "inactive_split"):
        for which in ("current", "peak", "allocated", "freed"):
            stats[f"{prefix}.all.{which}"] = 0
    stats["num_alloc_retries"] = totals["alloc_retries"]
    stats["num_ooms"] = totals["ooms"]
    return stats


def snapshot(device: Optional[int] = None) -> dict:
    """The runtime's state and kept history as ``torch.cuda.memory._snapshot()`` shapes it: each
    mapped run of pages an expandable segment with its live blocks, each event a trace entry
    (no stack frames: rlmem does not walk Python's stack). Needs ``install(history=N)``."""
    taken = _document("rlmem_runtime_snapshot_json", device)
    for segment in taken["segments"]:
        segment["segment_pool_id"] = tuple(segment["segment_pool_id"])
    return taken


def dump_snapshot(path, device: Optional[int] = None) -> None:
    """Writes :func:`snapshot` as torch's ``_dump_snapshot`` writes its own (a pickle, protocol
    4), for ``rlmem inspect``, ``replay`` and ``report``."""
    import pickle

    taken = snapshot(device)
    with open(path, "wb") as out:
        pickle.dump(taken, out, protocol=4)


@contextlib.contextmanager
def pool(tag: str, device: Optional[int] = None) -> Iterator[Any]:
    """Allocations inside go to a ``torch.cuda.MemPool`` whose segments rlmem maps under ``tag``
    (torch's allocator stays the process's: its stats and OOM errors work as usual). Yields the
    pool; one pool per tag and device, kept for the process's life (PyTorch frees a pool's
    memory only when nothing references it)."""
    global _pool_allocator
    torch = _torch.require_cuda("rlmem.runtime.pool()", "2.5", _has_memory_pools)

    ordinal = _device(device)
    with _state_lock:
        if _pool_allocator is None:
            _pool_allocator = torch._C._cuda_customAllocator(
                _function_address("rlmem_torch_pool_malloc"), _function_address("rlmem_torch_free"))
        memory_pool = _pools.get((tag, ordinal))
        if memory_pool is None:
            memory_pool = torch.cuda.MemPool(_pool_allocator)
            _pools[(tag, ordinal)] = memory_pool
    with region(tag, ordinal), torch.cuda.use_mem_pool(memory_pool, device=ordinal):
        yield memory_pool


class GrowableBuffer:
    """Device memory that grows in place: ``max_bytes`` of addresses reserved at once, pages
    mapped as it grows, the data never moving (a KV cache that grows with the sequence, instead
    of ``torch.cat`` copies or a worst-case preallocation).

    ``view(shape, dtype)`` gives a tensor over the buffer's start, without a copy, through
    ``__cuda_array_interface__``; after :meth:`grow`, take a new view at the new size (old views
    stay valid: the memory under them does not move). The buffer belongs to the region's tag
    when made, so it pauses and resumes with it. Each view holds the buffer, so its memory is
    released (:meth:`release`) once neither the buffer nor any view is referenced.
    """

    def __init__(self, max_bytes: int, device: Optional[int] = None):
        wanted = _lib.whole_number("max_bytes", max_bytes, (1, _lib.UINT64[1]),
                                   f"max_bytes must be a positive number of bytes up to 2**64 - 1, not {max_bytes!r}")
        self.device = _device(device)
        _ensure_open(self.device)
        address = ctypes.c_uint64()
        _call("rlmem_runtime_growable_reserve", self.device, wanted, ctypes.byref(address))
        self.address = address.value
        self.max_bytes = wanted
        self.nbytes = 0
        self._release = weakref.finalize(self, _release_growable, self.device, self.address)
        # Not at interpreter exit: the process's CUDA context may be gone by then.
        self._release.atexit = False

    def grow(self, nbytes: int) -> int:
        """Makes the first ``nbytes`` usable; returns the bytes usable now (whole pages). More
        than ``max_bytes`` raises :class:`InvalidArgumentError` and changes nothing."""
        if not self._release.alive:
            raise RuntimeStateError("this GrowableBuffer was released")
        grown = ctypes.c_uint64()
        _call("rlmem_runtime_grow", self.device, self.address, _lib.whole_number("nbytes", nbytes, _lib.UINT64), ctypes.byref(grown))
        self.nbytes = grown.value
        return self.nbytes

    def view(self, shape: tuple[int, ...] | list[int], dtype: Any = None) -> Any:
        """A CUDA tensor of ``shape`` and ``dtype`` (default uint8) over the buffer's start."""
        import torch

        dtype = torch.uint8 if dtype is None else dtype
        shape = tuple(int(dim) for dim in shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        needed = itemsize
        for dim in shape:
            needed *= dim
        if needed > self.nbytes:
            raise InvalidArgumentError(f"a view of {needed} bytes over {self.nbytes} grown: grow() first")
        # The interface has no bfloat16: its bytes are viewed as int16, then reinterpreted.
        typestr = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<i2", torch.uint8: "|u1",
                   torch.int16: "<i2", torch.int32: "<i4", torch.int64: "<i8"}.get(dtype)
        if typestr is None:
            raise InvalidArgumentError(f"views of {dtype} are not supported")
        # torch keeps the object it took the interface from for as long as the tensor lives; the
        # object holds the buffer, so the buffer outlives every view.
        memory = types.SimpleNamespace(__cuda_array_interface__={
            "shape": shape, "typestr": typestr, "data": (self.address, False), "version": 3, "strides": None},
            owner=self)
        tensor = torch.as_tensor(memory, device=f"cuda:{self.device}")
        return tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor

    def release(self) -> None:
        """Unmaps the buffer and frees its addresses now (after a device synchronize); views
        taken before must not be used after."""
        if self._release.alive:
            self._release.detach()
            _call("rlmem_runtime_growable_release", self.device, self.address)


def _release_growable(device: int, address: int) -> None:
    # A buffer no one references any more; its runtime may have been closed first (tests).
    lib, _ = _lib.load()
    lib.rlmem_runtime_growable_release(device, ctypes.c_uint64(address), None)


def _open_fake(device: int, total_bytes: int, granularity: int = 2 << 20, **options: Any) -> None:
    """A runtime over a host-backed fake device (tests without a GPU)."""
    _call("rlmem_runtime_open_fake", device, total_bytes, granularity,
          ctypes.byref(_options(options.get("capacity"), options.get("release_free_pages", False),
                                options.get("copy_chunk_bytes"), options.get("keep_host_buffers", False),
                                options.get("history", 0))))


def _close(device: int) -> None:
    lib, _ = _lib.load()
    lib.rlmem_runtime_close(_device(device))


def _allocate(device: int, size: int, stream: int = 0) -> int:
    address = ctypes.c_uint64()
    _call("rlmem_runtime_allocate", device, size, stream, ctypes.byref(address))
    return address.value


def _free(device: int, address: int) -> None:
    _call("rlmem_runtime_free", device, address)


def _write(device: int, address: int, data: bytes) -> None:
    buffer = ctypes.create_string_buffer(data, len(data))
    _call("rlmem_runtime_write", device, address, buffer, len(data))


def _read(device: int, address: int, size: int) -> bytes:
    buffer = ctypes.create_string_buffer(size)
    _call("rlmem_runtime_read", device, address, buffer, size)
    return buffer.raw
