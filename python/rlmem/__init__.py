"""rlmem: GPU memory of PyTorch RL fine-tuning jobs, measured inside the training loop.

A thin Python layer over librlmem (the rlmem C++ library, loaded with ctypes); every rule lives
in the library. torch is imported only by the parts that need it, so ``import rlmem`` works
without it.

* :func:`inspect` -- what ``rlmem inspect --json`` reports on a snapshot, as Python objects.
* :func:`report` -- the self-contained HTML page of ``rlmem report``.
* :func:`leak_check` / :func:`judge_step` -- the step-end rules (leak, fragmentation, retries,
  headroom with the OOM forecast, OOMs) as the monitor and ``rlmem watch`` apply them.
* :class:`record` -- record allocation history; snapshots every N steps, at exit, and on OOM
  (with rlmem's verdict).
* :class:`StepMonitor` / :func:`monitored` -- per-step figures, a JSON-lines log and alerts
  (leak, fragmentation, alloc_retries, headroom, oom, imbalance across ranks).
* ``rlmem.integrations.RlmemCallback`` -- the monitor as a ``transformers.TrainerCallback``.
* ``rlmem.runtime`` -- rlmem's CUDA virtual-memory allocator: ``install()``, ``region(tag)``,
  ``pause(tag)`` / ``resume(tag)``, statistics per tag.

Errors are :class:`RlmemError` subclasses carrying the CLI's message.
"""

from __future__ import annotations

from .core import inspect, library_path, report, version
from .errors import (
    BadInputError,
    InternalError,
    DeviceError,
    InvalidArgumentError,
    LibraryError,
    RlmemError,
    RlmemMemoryError,
    RuntimeStateError,
)
from .monitor import Alert, AlertWarning, StepMonitor, monitored
from .recording import oom_verdict_line, record
from .rules import LeakVerdict, StepJudgment, StepRules, judge_step, leak_check

__all__ = [
    "__version__",
    "inspect",
    "report",
    "leak_check",
    "LeakVerdict",
    "StepRules",
    "StepJudgment",
    "judge_step",
    "version",
    "library_path",
    "record",
    "oom_verdict_line",
    "StepMonitor",
    "monitored",
    "Alert",
    "AlertWarning",
    "RlmemError",
    "InvalidArgumentError",
    "BadInputError",
    "RlmemMemoryError",
    "InternalError",
    "LibraryError",
    "RuntimeStateError",
    "DeviceError",
]


def __getattr__(name: str):
    # rlmem.integrations (it knows about transformers) and rlmem.runtime are imported on first use.
    if name in ("integrations", "runtime"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    # __version__ is read when asked for, from the one place rlmem's version is written
    # (CMakeLists.txt, stamped into an installed package): see rlmem._version.
    if name == "__version__":
        from ._version import package_version  # noqa: PLC0415

        found = package_version()
        if found is None:
            raise AttributeError("rlmem.__version__: this package has neither the stamp of an installed package nor the "
                                 "checkout's CMakeLists.txt beside it")
        return found
    raise AttributeError(f"module 'rlmem' has no attribute {name!r}")
