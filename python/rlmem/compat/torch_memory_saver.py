"""torch_memory_saver's API, answered by rlmem's runtime (docs/runtime-compat.md).

A drop-in for the ``torch_memory_saver`` package (fzyzcjy/torch_memory_saver, which SGLang's
``--enable-memory-saver``, verl and slime call): the same module-level names
(``torch_memory_saver``, ``TorchMemorySaver``, ``configure_subprocess``) and the same calls, over
:mod:`rlmem.runtime`'s tags::

    import sys, rlmem.compat.torch_memory_saver
    sys.modules["torch_memory_saver"] = rlmem.compat.torch_memory_saver   # before the framework imports it

    from torch_memory_saver import torch_memory_saver
    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):
        model = load()                          # rlmem tag "weights", backed up to pinned host memory on pause
    with torch_memory_saver.region(tag="kv_cache"):
        kv = allocate_kv()                      # rlmem tag "kv_cache", discarded on pause (zeros after resume)
    torch_memory_saver.pause()                  # every resident tag; or pause("kv_cache")
    torch_memory_saver.resume("weights")        # staged, as verl does; resume() resumes every paused tag

How it maps:

- rlmem becomes the process's allocator (``rlmem.runtime.install()``) when this module is
  imported on a machine with CUDA, or at the first call if that was too early; it must happen
  before the process's first CUDA allocation, as with any allocator. One already installed (with
  options of your choice) is kept.
- ``region(tag, enable_cpu_backup)`` is ``rlmem.runtime.region(tag)`` on the current device; a
  tag is paused with ``keep="host"`` if any of its regions asked for ``enable_cpu_backup=True``,
  else ``keep="discard"`` (its memory reads as zeros after resume). TMS's tag ``"default"`` is the
  rlmem tag ``"tms_default"`` (rlmem's own ``"default"`` holds every untagged allocation).
- ``pause(tag)`` / ``resume(tag)`` act on that tag on every device where a region of it was
  entered; a tag nothing was allocated in is left alone, as the real package does.
  ``pause()`` pauses every such tag that is resident, ``resume()`` every such tag that is paused.
  Pausing a paused tag or resuming a resident one by name raises ``RuntimeStateError`` (the real
  package prints and exits the process).
- ``disable()``: allocations inside go to a tag that is never paused (rlmem's ``"default"``).
- ``cuda_graph(...)``: ``torch.cuda.graph(...)`` with a region of ``tag`` inside, so what the
  capture allocates belongs to ``tag`` (under ``install()`` torch keeps no graph pool: the
  capture's allocations go straight to rlmem, on the capture stream's own address space). Such a
  tag cannot be paused: see docs/runtime-compat.md.
- ``TMS_INIT_ENABLE=1`` (slime's training processes): every allocation outside ``disable()``
  belongs to TMS's ``"default"`` tag, which is then rlmem's ``"default"`` (backed up on pause with
  ``TMS_INIT_ENABLE_CPU_BACKUP=1``); ``disable()`` allocates in ``"tms_untracked"`` and gives its
  free pages back on exit, as the real package drops its pool.

rlmem's regions hold for every thread (torch_memory_saver's are per thread), and NCCL's own
buffers are not rlmem's (the real package's preload mode catches NCCL's ``cudaMalloc`` too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from typing import Any, Iterator, Optional

from .. import runtime
from ..errors import RlmemError, RuntimeStateError

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

logger = logging.getLogger(__name__)

_TAG_DEFAULT = "default"
#: rlmem's tag for torch_memory_saver's "default" tag (rlmem's "default" holds untagged memory).
RLMEM_TAG_FOR_DEFAULT = "tms_default"
#: rlmem's tag for allocations inside disable() under TMS_INIT_ENABLE=1.
UNTRACKED_TAG = "tms_untracked"
CPU_BACKUP_BACKENDS = ("pinned", "mmap")
HOOK_MODES = ("preload", "torch")


def _env_flag(name: str) -> bool:
    """As torch_memory_saver reads its TMS_* variables."""
    return os.environ.get(name, "") in ("1", "true", "TRUE", "yes", "YES")


class _Tag:
    __slots__ = ("keep_host",)

    def __init__(self) -> None:
        self.keep_host = False  # a region of the tag asked for enable_cpu_backup=True


class _State:
    """Process-wide, as torch_memory_saver's core is: every TorchMemorySaver shares it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.tags: dict[int, dict[str, _Tag]] = {}  # device -> rlmem tag -> what we know, in first-use order
        self.regions = 0  # compat regions open now
        self.disabled = 0  # disable() contexts open now
        self.initialized = False
        self.init_enable = False  # TMS_INIT_ENABLE: every allocation is tracked
        self.init_cpu_backup = False  # TMS_INIT_ENABLE_CPU_BACKUP
        self.retain_cpu_backup: Optional[bool] = None
        self.hook_mode = "preload"
        self.memory_margin_bytes: Optional[int] = None


_state = _State()


def _device() -> int:
    return runtime._device(None)


def _rlmem_tag(tag: str) -> str:
    if tag == _TAG_DEFAULT and not _state.init_enable:
        return RLMEM_TAG_FOR_DEFAULT
    return tag


def _note(device: int, rlmem_tag: str) -> _Tag:
    with _state.lock:
        tags = _state.tags.setdefault(device, {})
        if rlmem_tag not in tags:
            tags[rlmem_tag] = _Tag()
            if _state.init_enable and rlmem_tag == _TAG_DEFAULT:
                tags[rlmem_tag].keep_host = _state.init_cpu_backup
        return tags[rlmem_tag]


def _runtime_tags(device: int) -> dict[str, bool]:
    """rlmem's tags of ``device`` that have had allocations: name -> paused."""
    return {tag["name"]: bool(tag["paused"]) for tag in runtime.statistics(device)["tags"]}


def _initialize() -> None:
    """rlmem as the process's allocator (if it is not yet), and the TMS_INIT_* settings."""
    with _state.lock:
        if _state.initialized:
            return
        if not runtime.installed():
            retain = _state.retain_cpu_backup
            if retain is None:
                retain = _env_flag("TMS_RETAIN_CPU_BACKUP")
            try:
                runtime.install(keep_host_buffers=bool(retain))
            except RuntimeStateError as error:
                raise RuntimeStateError(
                    "rlmem.compat.torch_memory_saver: rlmem must become the allocator before the process's first "
                    "CUDA allocation: import (or alias) torch_memory_saver before anything touches CUDA, or call "
                    f"rlmem.runtime.install() first ({error})"
                ) from None
        _state.init_enable = _env_flag("TMS_INIT_ENABLE")
        _state.init_cpu_backup = _env_flag("TMS_INIT_ENABLE_CPU_BACKUP")
        _state.initialized = True
        if _state.init_enable:
            _note(_device(), _TAG_DEFAULT)


def _validate_cpu_backup_backend(enable_cpu_backup: bool, cpu_backup_backend: Optional[str]) -> None:
    if cpu_backup_backend is None:
        return
    if not enable_cpu_backup:
        raise ValueError("cpu_backup_backend requires enable_cpu_backup=True")
    if cpu_backup_backend not in CPU_BACKUP_BACKENDS:
        raise ValueError(f"cpu_backup_backend must be one of {CPU_BACKUP_BACKENDS}, not {cpu_backup_backend!r}")
    # Both are rlmem's pinned slabs, freed after resume unless install(keep_host_buffers=True): the
    # host memory that "mmap" exists to give back (torch_memory_saver #90) is given back either way.


def _reraise(call: str, error: RlmemError):
    return type(error)(f"torch_memory_saver.{call}: {error}", error.status, error.status_name)


def _targets(tag: Optional[str]) -> list[tuple[int, str, _Tag]]:
    with _state.lock:
        if tag:
            name = _rlmem_tag(tag)
            return [(device, name, tags[name]) for device, tags in _state.tags.items() if name in tags]
        return [(device, name, info) for device, tags in _state.tags.items() for name, info in tags.items()]


def _pause(tag: Optional[str]) -> None:
    call = f"pause({tag!r})"
    with _state.lock:
        if _state.init_enable:
            _note(_device(), _TAG_DEFAULT)
        plan = []
        for device, name, info in _targets(tag):
            present = _runtime_tags(device)
            if name not in present:
                continue  # nothing was ever allocated in it: nothing to pause
            if not tag and present[name]:
                continue  # pause() pauses what is resident
            plan.append((device, name, "host" if info.keep_host else "discard"))
        for device, name, keep in plan:
            try:
                runtime.pause(name, keep=keep, device=device)
            except RlmemError as error:
                raise _reraise(call, error) from error


def _resume(tag: Optional[str]) -> None:
    call = f"resume({tag!r})"
    with _state.lock:
        for device, name, _info in _targets(tag):
            present = _runtime_tags(device)
            if name not in present:
                continue
            if not tag and not present[name]:
                continue  # resume() resumes what is paused
            try:
                runtime.resume(name, device=device)
            except RlmemError as error:
                raise _reraise(call, error) from error


class TorchMemorySaver:
    """torch_memory_saver's ``TorchMemorySaver`` over rlmem's runtime; every instance shares the
    process's tags (use the module's ``torch_memory_saver``)."""

    @contextlib.contextmanager
    def region(self, tag: str = _TAG_DEFAULT, enable_cpu_backup: bool = False, enable_disk_backup: bool = False,
               cpu_backup_backend: Optional[str] = None) -> Iterator[None]:
        """Allocations inside (on the current device, every thread) belong to ``tag``: backed up to
        pinned host memory on pause if ``enable_cpu_backup``, else discarded (zeros after resume)."""
        _validate_cpu_backup_backend(enable_cpu_backup, cpu_backup_backend)
        _initialize()
        assert not (enable_cpu_backup and enable_disk_backup), \
            "enable_cpu_backup and enable_disk_backup are mutually exclusive"
        if enable_disk_backup:
            raise NotImplementedError(
                "rlmem.compat.torch_memory_saver: enable_disk_backup is not supported; rlmem backs a paused tag up "
                "to pinned host memory (enable_cpu_backup=True) or discards it")
        device = _device()
        name = _rlmem_tag(tag)
        with runtime.region(name, device):
            with _state.lock:
                info = _note(device, name)
                info.keep_host = info.keep_host or bool(enable_cpu_backup)
                _state.regions += 1
            try:
                yield
            finally:
                with _state.lock:
                    _state.regions -= 1

    @contextlib.contextmanager
    def cuda_graph(self, cuda_graph: Any, pool: Any = None, stream: Any = None, capture_error_mode: str = "global",
                   tag: str = _TAG_DEFAULT, enable_cpu_backup: bool = False,
                   cpu_backup_backend: Optional[str] = None) -> Iterator[None]:
        """``torch.cuda.graph(cuda_graph, pool, stream, capture_error_mode)`` whose allocations belong
        to ``tag``. rlmem keeps the blocks the capture allocated (every replay uses them), so the tag
        pauses and resumes like any other and the graph replays after (docs/runtime-compat.md)."""
        _validate_cpu_backup_backend(enable_cpu_backup, cpu_backup_backend)
        _initialize()
        import torch

        with torch.cuda.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode):
            with self.region(tag=tag, enable_cpu_backup=enable_cpu_backup):
                yield

    @contextlib.contextmanager
    def disable(self, dispose_mem_pool_after_use: bool = True) -> Iterator[None]:
        """Allocations inside are not tracked: they go to a tag no pause touches."""
        _initialize()
        assert dispose_mem_pool_after_use, "Only dispose_mem_pool_after_use=true is supported now"
        assert _state.init_enable or _state.regions > 0, "disable() should be called only when tms is active"
        device = _device()
        untracked = UNTRACKED_TAG if _state.init_enable else "default"
        with runtime.region(untracked, device):
            with _state.lock:
                _state.disabled += 1
            try:
                yield
            finally:
                with _state.lock:
                    _state.disabled -= 1
                    outermost = _state.disabled == 0
        if outermost and _state.init_enable:
            # The real package drops the pool disable() allocated from: the memory goes back.
            runtime.empty_cache(device)

    def pause(self, tag: Optional[str] = None) -> None:
        """Releases the device memory of ``tag`` (every resident tag if None), keeping addresses."""
        _initialize()
        _pause(tag)

    def resume(self, tag: Optional[str] = None) -> None:
        """Maps ``tag``'s memory again (every paused tag if None): contents restored from the host
        backup, or zeros."""
        _initialize()
        _resume(tag)

    @property
    def enabled(self) -> bool:
        return True

    @property
    def hook_mode(self):
        raise AttributeError("hook_mode can only be set")

    @hook_mode.setter
    def hook_mode(self, hook_mode: str) -> None:
        # Both modes are rlmem's allocator here: nothing to preload, nothing to choose.
        if hook_mode not in HOOK_MODES:
            raise ValueError(f"hook_mode must be one of {HOOK_MODES}, not {hook_mode!r}")
        _state.hook_mode = hook_mode

    @property
    def memory_margin_bytes(self):
        raise NotImplementedError("Only setter is supported")

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value: int) -> None:
        _state.memory_margin_bytes = int(value)
        warnings.warn(
            "rlmem.compat.torch_memory_saver: memory_margin_bytes is not enforced; rlmem refuses a request the "
            "device cannot serve (torch.OutOfMemoryError) and caps its memory with rlmem.runtime.install(capacity=...)",
            stacklevel=2)

    @property
    def retain_cpu_backup(self) -> bool:
        if _state.retain_cpu_backup is not None:
            return _state.retain_cpu_backup
        return _env_flag("TMS_RETAIN_CPU_BACKUP")

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value: bool) -> None:
        with _state.lock:
            _state.retain_cpu_backup = bool(value)
            if runtime.installed():
                warnings.warn(
                    "rlmem.compat.torch_memory_saver: retain_cpu_backup is "
                    "rlmem.runtime.install(keep_host_buffers=...), which is set when rlmem is installed; setting it "
                    "now changes nothing", stacklevel=2)

    def get_cpu_backup(self, x: Any, zero_copy: bool = False):
        raise NotImplementedError(
            "rlmem.compat.torch_memory_saver: get_cpu_backup() is not supported; rlmem's host backup of a paused "
            "tag is packed pinned slabs, not one buffer per tensor")

    def set_disk_backup_dir(self, path: str) -> None:
        raise NotImplementedError("rlmem.compat.torch_memory_saver: disk backup is not supported")


@contextlib.contextmanager
def configure_subprocess() -> Iterator[None]:
    """The real package puts its library on LD_PRELOAD for processes started inside; here the
    processes started inside import this module for ``torch_memory_saver`` (rlmem.compat's shim
    folder first on PYTHONPATH)."""
    from . import shim_path

    previous = os.environ.get("PYTHONPATH")
    folder = shim_path()
    os.environ["PYTHONPATH"] = folder if not previous else f"{folder}{os.pathsep}{previous}"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


# Global singleton, as torch_memory_saver's own __init__ makes it.
torch_memory_saver = TorchMemorySaver()


def _install_early() -> None:
    """rlmem becomes the allocator when this module is imported where CUDA is (it must precede the
    first CUDA allocation, and frameworks import torch_memory_saver early); a failure waits for the
    first call, which raises it."""
    try:
        import torch

        if not torch.cuda.is_available():
            return
        _initialize()
    except Exception as error:  # noqa: BLE001 - reported by the first call instead
        logger.debug("rlmem.compat.torch_memory_saver: rlmem not installed at import: %s", error)


_install_early()
