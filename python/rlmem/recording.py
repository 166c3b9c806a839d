"""rlmem.record: record PyTorch's allocation history, dump snapshots safely, explain OOMs.

::

    with rlmem.record("snapshots/", every=50) as rec:      # or @rlmem.record("snapshots/")
        for batch in loader:
            train_step(batch)
            rec.step()            # a snapshot every 50 steps; the newest 3 kept

On ``torch.OutOfMemoryError`` inside the block the snapshot is written before the error goes on,
and one line with rlmem's verdict on it is printed to stderr::

    rlmem: OOM: FRAGMENTATION, requested 468.1 MiB: live tensors (1.86 GiB) plus the request ... Advice: ...
"""

from __future__ import annotations

import functools
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Callable, Optional, TextIO, Union

from . import _dist, _torch
from ._format import format_bytes
from ._limit import process_limit
from .errors import RlmemError

__all__ = ["record", "oom_verdict_line"]


def _is_directory_target(target: str) -> bool:
    return target.endswith(("/", os.sep)) or os.path.isdir(target) or Path(target).suffix == ""


def atomic_dump(cuda, final_path: str) -> str:
    """Writes the allocator's snapshot to ``final_path`` atomically: to a temporary name in the same
    directory, fsync, then ``os.replace``. A failure (or a crash) while dumping never leaves a
    partial file under the final name: the temporary file is removed on failure, and a process
    killed mid-dump leaves only a ``.NAME.rlmem-tmp-PID-XXXX`` file."""
    directory = os.path.dirname(final_path) or "."
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(
        directory, f".{os.path.basename(final_path)}.rlmem-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    )
    try:
        _torch.dump_snapshot_to(cuda, temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temporary, final_path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _torch.fsync_directory(directory)
    return final_path


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _verdict_words(oom: dict) -> str:
    verdict = str(oom.get("verdict", "?"))
    if verdict == "depends_on_limit" and oom.get("fragmentation_from_bytes"):
        return f"FRAGMENTATION if the limit was at least {format_bytes(oom['fragmentation_from_bytes'])}, CAPACITY below"
    return verdict.upper()


def oom_verdict_line(snapshot_path: str, report: dict, limit_source: Optional[str] = None) -> str:
    """The one line ``record`` prints after an OOM, from ``rlmem.inspect``'s report of the snapshot
    it wrote: the last ``oom`` entry's verdict, figures, explanation and advice, all computed by
    librlmem. ``limit_source``: where the limit the report was judged under came from (the
    process's memory fraction, torch's message...), said beside the verdict."""
    ooms = report.get("oom") or []
    if not ooms:
        return (f"rlmem: OOM: the snapshot {snapshot_path} holds no oom event, so rlmem has no verdict "
                f"(the allocator raised nothing while it recorded, or recording began after the failed request)")
    oom = ooms[-1]
    judged = ""
    if limit_source and oom.get("limit_given"):
        judged = f" (judged under the {format_bytes(oom['limit_low_bytes'])} limit of {limit_source})"
    line = f"rlmem: OOM: {_verdict_words(oom)}{judged}, requested {format_bytes(oom['requested_bytes'])}"
    if oom.get("explanation"):
        line += f": {_one_line(oom['explanation']).rstrip('.')}"
    else:
        line += (f" with {format_bytes(oom['allocated_bytes'])} allocated and {format_bytes(oom['reserved_bytes'])}"
                 f" reserved, largest free block {format_bytes(oom['largest_free_block_bytes'])}")
    if oom.get("advice"):
        line += f". Advice: {_one_line(oom['advice']).rstrip('.')}"
    more = f" ({len(ooms)} OOM events in the trace, this is the last)" if len(ooms) > 1 else ""
    return f"{line}. Snapshot: {snapshot_path}{more}"


class record:
    """Records PyTorch's CUDA allocation history and writes snapshots ``rlmem inspect`` reads.

    A context manager and a decorator. On entry it turns on
    ``torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks,
    max_entries=max_entries)`` (the bool form on torch 1.13); on exit it dumps a snapshot
    (``dump_at_exit``) and turns recording off again, unless it was already on when the block
    began: then the user's recording and its settings are left as they were (where torch can tell:
    ``torch._C._cuda_isHistoryEnabled``, which torch 1.13 lacks; there rlmem assumes it was off).

    ``path_or_dir``:
      * a directory (an existing one, or a path ending in ``/`` or without a suffix): snapshots go
        to ``rlmem-step000050.pickle``, ``rlmem-exit.pickle``, ``rlmem-oom.pickle`` in it
        (``rlmem-rank3-...`` in a torch.distributed job, so ``rlmem inspect DIR`` can compare
        ranks); the newest ``keep`` step and exit snapshots are kept, OOM snapshots never deleted;
      * a file path (``run.pickle``): it always holds the newest snapshot. ``{rank}`` in it is
        replaced with the process's rank.

    ``every``: also dump every N calls of :meth:`step`. ``on_oom``: on ``torch.OutOfMemoryError``
    (``torch.cuda.OutOfMemoryError`` on 1.13) the snapshot is written first, then one line with
    rlmem's verdict on it goes to ``verdict_stream`` (stderr), then the error is re-raised,
    unchanged. ``limit``: the memory limit in bytes for that verdict; by default the process's
    own: ``torch.cuda.get_per_process_memory_fraction()`` times the device's memory, else the
    ``... allowed`` figure of torch's OOM message, else the free device memory plus what the
    process reserved (the line says which). A snapshot alone proves only a range.
    ``mark_steps``: :meth:`step` also opens a ``ProfilerStep#N`` range that torch records into the
    snapshot, so ``rlmem inspect`` finds the step ends where you called ``step()``.

    Every file is written atomically (temporary name, fsync, rename): a crash while dumping never
    leaves a partial file under a final name.

    Cost: with ``stacks="python"`` torch captures a Python stack per allocation (a few
    microseconds each); a dump pickles the whole trace (seconds for a million entries). See
    docs/monitor.md for numbers measured on a GRPO loop.

    Under ``rlmem.runtime.install()`` torch's history calls raise: the snapshots are then rlmem's
    own history (``install(history=N)``, which it asks for), written the same way.

    ``cuda``: the ``torch.cuda``-like module to use; tests pass a stand-in.
    """

    def __init__(
        self,
        path_or_dir: Union[str, "os.PathLike[str]"],
        *,
        every: Optional[int] = None,
        keep: int = 3,
        max_entries: int = 1_000_000,
        stacks: str = "python",
        on_oom: bool = True,
        dump_at_exit: bool = True,
        limit: Optional[int] = None,
        mark_steps: bool = True,
        verdict_stream: Optional[TextIO] = None,
        cuda=None,
    ) -> None:
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ValueError(f"every must be a positive number of steps or None, not {every!r}")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep!r}")
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be a positive int, not {max_entries!r}")
        if stacks not in ("python", "all"):
            raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
        self.target = os.fspath(path_or_dir)
        self.every = every
        self.keep = keep
        self.max_entries = max_entries
        self.stacks = stacks
        self.on_oom = on_oom
        self.dump_at_exit = dump_at_exit
        self.limit = limit
        self.mark_steps = mark_steps
        self.verdict_stream = verdict_stream
        self._cuda = cuda
        self.active = False
        self.steps = 0
        #: every snapshot this recorder wrote and still keeps, oldest first
        self.paths: list[str] = []
        #: the snapshot written for the last OOM, and the verdict line printed for it
        self.oom_snapshot: Optional[str] = None
        self.oom_verdict: Optional[str] = None
        self._started_history = False
        self._rotating: list[str] = []
        self._annotation = _torch.StepAnnotation()

    # -- context manager and decorator ---------------------------------------------------------

    def __enter__(self) -> "record":
        if self.active:
            raise RlmemError("this rlmem.record is already active (use one per block, or one per thread)")
        if self._cuda is None:
            _torch.require_cuda("rlmem.record", "1.13")
        cuda = _torch.default_cuda(self._cuda)
        self._cuda_module = cuda
        enabled = _torch.history_enabled(cuda)
        if enabled:
            self._started_history = False  # the user's recording: keep it and its settings
        else:
            _torch.start_history(cuda, stacks=self.stacks, max_entries=self.max_entries, clear=enabled is False)
            self._started_history = True
        self.active = True
        self.steps = 0
        if self.mark_steps:
            self._annotation.next(0)
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        try:
            if exc is not None and self.on_oom and isinstance(exc, _torch.oom_error_classes(self._cuda_module)):
                self._after_oom(exc)
            elif self.dump_at_exit and (exc is None or isinstance(exc, Exception)):
                if exc is None:
                    self._dump("exit")
                else:
                    try:
                        self._dump("exit")
                    except Exception as failure:  # never hide the user's own error behind ours
                        self._say(f"rlmem: could not write the snapshot at exit: {failure}")
        finally:
            self._annotation.close()
            self.active = False
            if self._started_history:
                self._started_history = False
                _torch.stop_history(self._cuda_module)
        return False

    def __call__(self, function: Callable) -> Callable:
        """As a decorator: each call of ``function`` runs inside this recorder."""

        @functools.wraps(function)
        def recorded(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return recorded

    # -- steps and dumps -----------------------------------------------------------------------

    def step(self) -> Optional[str]:
        """Marks the end of a step; every ``every`` steps dumps a snapshot and returns its path."""
        if not self.active:
            raise RlmemError("rlmem.record.step() called outside its with-block")
        self.steps += 1
        if self.mark_steps:
            self._annotation.next(self.steps)
        if self.every is not None and self.steps % self.every == 0:
            return self._dump(f"step{self.steps:06d}")
        return None

    def dump(self, label: str = "manual") -> str:
        """Writes a snapshot now (atomically) and returns its path. ``label`` names it in a
        directory (``rlmem-LABEL.pickle``); a file target is simply replaced."""
        if not self.active:
            raise RlmemError("rlmem.record.dump() called outside its with-block")
        if not label or any(ch in label for ch in "/\\\0"):
            raise ValueError(f"label {label!r} must be a non-empty file-name part")
        return self._dump(label)

    def _path_for(self, label: str) -> str:
        rank, world = _dist.rank_and_world()
        if _is_directory_target(self.target):
            prefix = f"rlmem-rank{rank}-" if world > 1 else "rlmem-"
            path = os.path.join(self.target, f"{prefix}{label}.pickle")
            if label.startswith("oom"):
                number = 2
                while os.path.exists(path):  # OOM snapshots are never replaced
                    path = os.path.join(self.target, f"{prefix}{label}-{number}.pickle")
                    number += 1
            return path
        return self.target.replace("{rank}", str(rank))

    def _dump(self, label: str) -> str:
        path = atomic_dump(self._cuda_module, self._path_for(label))
        if path in self.paths:
            self.paths.remove(path)
        self.paths.append(path)
        if _is_directory_target(self.target) and not label.startswith("oom"):
            if path in self._rotating:
                self._rotating.remove(path)
            self._rotating.append(path)
            while len(self._rotating) > self.keep:
                old = self._rotating.pop(0)
                try:
                    os.unlink(old)
                except FileNotFoundError:
                    pass
                if old in self.paths:
                    self.paths.remove(old)
        return path

    def _say(self, line: str) -> None:
        stream = self.verdict_stream if self.verdict_stream is not None else sys.stderr
        print(line, file=stream, flush=True)

    def _judged_limit(self, error: BaseException) -> tuple[Optional[int], Optional[str]]:
        """The limit for the verdict and where it came from: ``limit=``, else the process's own
        (``_limit.process_limit``: its memory fraction, torch's message, free + reserved)."""
        if self.limit is not None:
            return self.limit, "limit= given to record()"
        try:
            device = int(self._cuda_module.current_device())
        except Exception:
            device = None
        found = process_limit(self._cuda_module, device, error)
        return (found.bytes, found.source) if found is not None else (None, None)

    def _after_oom(self, error: BaseException) -> None:
        # Runs while the OOM propagates: it reports, and never replaces the OOM with its own error.
        try:
            path = self._dump("oom")
        except Exception as failure:
            self._say(f"rlmem: OOM: could not write the snapshot: {failure}")
            return
        self.oom_snapshot = path
        try:
            from .core import inspect  # noqa: PLC0415

            limit, source = self._judged_limit(error)
            try:
                report = inspect(path, limit=limit)
            except RlmemError:
                if limit is None or self.limit is not None:
                    raise
                # A reading (the message's rounding, free memory) outside the range the
                # recording shows: judged over that range instead, and said so.
                report = inspect(path)
                source = None
            line = oom_verdict_line(path, report, source)
        except Exception as failure:
            line = f"rlmem: OOM: snapshot {path} written, but rlmem could not read it: {failure}"
        self.oom_verdict = line
        self._say(line)
