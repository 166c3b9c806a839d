"""The few torch calls rlmem makes, written once for torch 1.13 to 2.x.

torch is imported only when a function here runs, so ``import rlmem`` works without it. Every
function takes the ``torch.cuda``-like module to use (``cuda``): the real one by default, a
stand-in in the tests.
"""

from __future__ import annotations

import inspect as _inspect
import os
import pickle
from typing import Any, Callable, Optional

from .errors import DeviceError, RlmemError


def import_torch():
    try:
        import torch  # noqa: PLC0415 (lazy on purpose)
    except ImportError as error:
        raise RlmemError(f"this part of rlmem needs PyTorch, which cannot be imported here ({error})") from None
    return torch


def require_cuda(what: str, minimum: str, has_api: Optional[Callable[[Any], bool]] = None):
    """torch, where it can run ``what``: built with CUDA (or ROCm's HIP, which torch.cuda drives
    alike), with the calls ``has_api(torch)`` checks for (those of PyTorch ``minimum`` on), and
    seeing a CUDA device. Else one :class:`DeviceError` that says what is missing, instead of
    whatever torch would raise deep inside (an ``AttributeError`` from ``torch._C``, an
    ``AssertionError`` "Torch not compiled with CUDA enabled")."""
    torch = import_torch()
    has_calls = has_api is None or has_api(torch)
    if has_calls and torch.cuda.is_available():
        return torch
    needs = f"{what} needs PyTorch {minimum} or later built with CUDA, and a CUDA device"
    version = getattr(torch, "__version__", "of unknown version")
    built = getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None)
    if not built:
        raise DeviceError(f"{needs}: this torch ({version}) is built without CUDA")
    if not has_calls:
        raise DeviceError(f"{needs}: this torch ({version}) lacks the calls it uses")
    raise DeviceError(f"{needs}: this torch ({version}) sees no CUDA device (torch.cuda.is_available() is False)")


def default_cuda(cuda=None):
    """``cuda`` if given, else ``torch.cuda``."""
    return cuda if cuda is not None else import_torch().cuda


def oom_error_classes(cuda) -> tuple:
    """The exception classes of a CUDA out-of-memory error: ``torch.OutOfMemoryError`` (2.x) and
    ``torch.cuda.OutOfMemoryError`` (1.13 on; the same class in 2.x)."""
    classes = []
    for owner in (cuda, _torch_if_loaded()):
        cls = getattr(owner, "OutOfMemoryError", None) if owner is not None else None
        if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in classes:
            classes.append(cls)
    return tuple(classes)


def _torch_if_loaded():
    import sys

    return sys.modules.get("torch")


def _history_function(cuda):
    memory = getattr(cuda, "memory", None)
    function = getattr(memory, "_record_memory_history", None)
    if function is None:
        raise RlmemError("this torch has no torch.cuda.memory._record_memory_history (PyTorch 1.13 or later needed)")
    return function


def _installed_runtime():
    """rlmem.runtime when it is the process's allocator: torch's history calls raise then, and the
    history is rlmem's own (install(history=N))."""
    import sys

    runtime = sys.modules.get("rlmem.runtime")
    return runtime if runtime is not None and runtime.installed() else None


def history_enabled(cuda) -> Optional[bool]:
    """Whether the allocator is recording history now; None where torch cannot tell (1.13).
    Under rlmem.runtime.install() it is rlmem's history, kept from install() on: True, or an
    error saying how to turn it on."""
    runtime = _installed_runtime()
    if runtime is not None:
        if runtime.history_entries() == 0:
            raise RlmemError("under rlmem.runtime.install() the allocation history is rlmem's: "
                             "install(history=N) to record the last N events")
        return True
    # torch 2.11's probe reads the allocator's state, which does not exist before CUDA is
    # initialised: calling it then is a segmentation fault. Nothing records before that.
    is_initialized = getattr(cuda, "is_initialized", None)
    if is_initialized is not None and not is_initialized():
        return False
    c_module = getattr(getattr(cuda, "memory", None), "_C", None)
    probe = getattr(c_module, "_cuda_isHistoryEnabled", None)
    if probe is None:
        return None
    return bool(probe())


def _parameters(function) -> Optional[set]:
    try:
        return set(_inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None


def start_history(cuda, *, stacks: str, max_entries: int, clear: bool) -> None:
    """Turns on allocation history with stack traces: ``enabled="all", context="all"`` on torch
    2.x; the bool form on 1.13, with the keywords that version has."""
    function = _history_function(cuda)
    parameters = _parameters(function)
    if parameters is None or "stacks" in parameters or "context" in parameters:
        arguments: dict[str, Any] = {"context": "all", "stacks": stacks, "max_entries": max_entries}
        if clear and (parameters is None or "clear_history" in parameters):
            arguments["clear_history"] = True
        function(enabled="all", **arguments)
        return
    legacy = {"record_context": True, "trace_alloc_max_entries": max_entries, "trace_alloc_record_context": True}
    function(True, **{key: value for key, value in legacy.items() if key in parameters})


def stop_history(cuda) -> None:
    function = _history_function(cuda)
    parameters = _parameters(function)
    if parameters is None or "stacks" in parameters or "context" in parameters:
        function(enabled=None)
    else:
        function(False)


def dump_snapshot_to(cuda, path: str) -> None:
    """Writes the allocator's snapshot to ``path`` (not atomically: see record._atomic_dump)."""
    runtime = _installed_runtime()
    if runtime is not None:
        runtime.dump_snapshot(path)
        return
    memory = getattr(cuda, "memory", None)
    dump = getattr(memory, "_dump_snapshot", None)
    if dump is not None:
        dump(path)
        return
    snapshot = getattr(memory, "_snapshot", None)
    if snapshot is None:
        raise RlmemError("this torch has neither torch.cuda.memory._dump_snapshot nor _snapshot")
    with open(path, "wb") as out:
        pickle.dump(snapshot(), out)


class StepAnnotation:
    """``ProfilerStep#N`` ranges around steps while rlmem records, so ``rlmem.inspect`` finds the
    step ends exactly where the caller put them (torch records ``record_function`` ranges of the
    recording thread into the snapshot's annotations). Does nothing where torch has no
    record_function."""

    def __init__(self) -> None:
        self._open = None

    def next(self, number: int) -> None:
        self.close()
        torch = _torch_if_loaded()
        profiler = getattr(getattr(torch, "autograd", None), "profiler", None) if torch is not None else None
        record_function = getattr(profiler, "record_function", None)
        if record_function is None:
            return
        try:
            marker = record_function(f"ProfilerStep#{number}")
            marker.__enter__()
        except Exception:  # an annotation is a help for inspect, never worth failing a step over
            return
        self._open = marker

    def close(self) -> None:
        marker, self._open = self._open, None
        if marker is not None:
            try:
                marker.__exit__(None, None, None)
            except Exception:
                pass


def fsync_directory(directory: str) -> None:
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
