"""The step-end rules of librlmem, from Python: ``leak_check`` (the growth rule on one series),
``judge_step`` (every rule of the StepMonitor at one step end) and ``judge_imbalance``.

The rules and their thresholds live once in the C++ library
(include/rlmem/step_rules/step_rules.hpp); ``rlmem watch`` calls the same code on a StepMonitor
log. This module checks arguments against their C types, calls, and converts back.
docs/monitor.md explains each rule.
"""

from __future__ import annotations

import array
import ctypes
import math
from dataclasses import dataclass, fields
from typing import Iterable, Optional, Sequence

from . import _lib
from .errors import InvalidArgumentError, RLMEM_OK, error_for_status

__all__ = ["leak_check", "LeakVerdict", "StepRules", "StepJudgment", "judge_step", "judge_imbalance",
           "SAMPLE_FIELDS"]

_INT64_MIN, _INT64_MAX = _lib.INT64
_UINT64_MAX = _lib.UINT64[1]

#: The figures of a step end, in the order of rlmem_step_sample.
SAMPLE_FIELDS = ("step", "allocated", "reserved", "inactive_split", "step_peak_allocated", "step_peak_reserved",
                 "allocations", "num_alloc_retries", "num_ooms", "device_free", "device_total", "limit")


def _whole(name: str, value, low: int, high: int) -> int:
    """`value` as an int of the C type [low, high], or the error that names it."""
    return _lib.whole_number(name, value, (low, high))


def _int_series(name: str, values: Iterable[int], low: int, high: int) -> list[int]:
    return [_whole(f"{name}[{index}]", value, low, high) for index, value in enumerate(values)]


def _check(lib, status: int, call: str) -> None:
    if status != RLMEM_OK:
        name = lib.rlmem_status_name(status).decode("ascii", "replace")
        raise error_for_status(status, f"{call} failed: {name}", name)


@dataclass(frozen=True)
class LeakVerdict:
    """The growth rule's verdict on one series (``bool(verdict)`` is ``verdict.leaking``).

    ``leaking``: significant growth, large enough, still going on at the last figure.
    ``stopped``: significant growth whose events stopped (a cache that filled) or thinned out
    (a buffer grown to the longest length seen). ``first_step``: the change point, the index of
    the first step end of the growth (>= 1; index 0 is the baseline); ``steps`` from there to the
    last; ``bytes_per_step`` the growth's rate (Theil-Sen slope; for growth every few steps the
    mean event over the period); ``events`` the step ends that rose above the noise, the last at
    ``last_event``, ``period`` apart (median); ``noise_bytes`` the series' scatter, ``level_bytes``
    its median; ``z`` the rate in standard errors, ``kendall_z`` Mann-Kendall's statistic.
    """

    leaking: bool
    first_step: int
    steps: int
    bytes_per_step: int
    stopped: bool = False
    last_event: int = 0
    events: int = 0
    period: int = 0
    noise_bytes: int = 0
    level_bytes: int = 0
    z: float = 0.0
    kendall_z: float = 0.0

    def __bool__(self) -> bool:
        return self.leaking


def _verdict(struct: _lib.LeakVerdictStruct) -> LeakVerdict:
    return LeakVerdict(bool(struct.leaking), int(struct.first_step), int(struct.steps), int(struct.bytes_per_step),
                       bool(struct.stopped), int(struct.last_event), int(struct.events), int(struct.period),
                       int(struct.noise_bytes), int(struct.level_bytes), float(struct.z), float(struct.kendall_z))


def leak_check(bytes_series: Iterable[int], counts: Optional[Iterable[int]] = None,
               steady_steps: Optional[int] = None) -> LeakVerdict:
    """The StepMonitor's growth rule on one series of step-end figures (the newest 256 judged).

    ``bytes_series[0]`` is the baseline, ``bytes_series[i]`` the figure at step end i. ``counts``
    (same length) is checked and not used: a leak into one tensor keeps the count flat.
    ``steady_steps`` is accepted for compatibility and not used. A series leaks when a change
    point, a Theil-Sen slope significant against the series' own scatter, and three step ends
    above the noise (or two alike ones up to four steps apart) say it grows, and it still grows
    at the last figure::

        >>> rlmem.leak_check([100, 100, 100, 150, 200, 250]).leaking
        True
    """
    lib, _ = _lib.load()
    values = _int_series("bytes_series", bytes_series, _INT64_MIN, _INT64_MAX)
    n = len(values)
    if counts is not None:
        count_values = _int_series("counts", counts, 0, _UINT64_MAX)
        if len(count_values) != n:
            raise InvalidArgumentError(f"counts has {len(count_values)} values, bytes_series {n}: they must match")
    if steady_steps is not None and (isinstance(steady_steps, bool) or not isinstance(steady_steps, int) or steady_steps < 2):
        raise InvalidArgumentError(f"steady_steps must be an integer of at least 2, not {steady_steps!r}")
    byte_array = (ctypes.c_int64 * n)(*values)
    verdict = _lib.LeakVerdictStruct()
    verdict.struct_size = ctypes.sizeof(_lib.LeakVerdictStruct)
    _check(lib, lib.rlmem_leak_check(byte_array, None, n, 0, ctypes.byref(verdict)), "rlmem_leak_check")
    return _verdict(verdict)


@dataclass(frozen=True)
class StepRules:
    """Thresholds of the step-end rules (rlmem_step_rules; defaults as librlmem's)."""

    leak_window: int = 64
    leak_min_z: float = 4.0
    leak_min_events: int = 3
    leak_min_relative_rate: float = 1e-4
    leak_min_bytes_per_step: int = 0
    leak_stop_after_periods: float = 2.0
    fragmentation_bytes: int = 512 * 1024**2
    fragmentation_fraction: float = 0.20
    fragmentation_window: int = 5
    headroom_fraction: float = 0.10
    headroom_steps: int = 500

    def __post_init__(self) -> None:
        self._struct()  # every field checked against its C type
        ranges = {"leak_window": (3, 256), "leak_min_events": (2, _UINT64_MAX), "leak_min_relative_rate": (0, 1),
                  "leak_min_z": (0, math.inf), "leak_stop_after_periods": (1, 1000), "fragmentation_fraction": (0, 1),
                  "fragmentation_window": (1, 1_000_000), "headroom_fraction": (0, 1),
                  "leak_min_bytes_per_step": (0, _INT64_MAX), "fragmentation_bytes": (0, _INT64_MAX),
                  "headroom_steps": (0, _INT64_MAX)}
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise InvalidArgumentError(f"{name} must be in [{low}, {high}], not {value!r}")

    def _struct(self) -> _lib.StepRulesStruct:
        struct = _lib.StepRulesStruct()
        struct.struct_size = ctypes.sizeof(_lib.StepRulesStruct)
        for field in fields(self):
            value = getattr(self, field.name)
            ctype = dict(_lib.StepRulesStruct._fields_)[field.name]
            if ctype is ctypes.c_double:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise InvalidArgumentError(f"{field.name} must be a finite number, not {value!r}")
            else:
                low, high = (0, _UINT64_MAX) if ctype is ctypes.c_uint64 else (_INT64_MIN, _INT64_MAX)
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                    raise InvalidArgumentError(f"{field.name} must be an integer in [{low}, {high}], not {value!r}")
            setattr(struct, field.name, value)
        return struct


@dataclass(frozen=True)
class StepJudgment:
    """What the rules say at the newest step end (rlmem_step_judgment). ``leak`` indexes are into
    the history given; ``steps_to_limit`` is None without a leak."""

    leak: LeakVerdict
    leak_count_before: int
    peak_allocated_seen: int
    unused_reserved: int
    fragmented: bool
    fragmentation: bool
    fragmentation_growth: int
    fragmentation_steps: int
    alloc_retries: bool
    new_alloc_retries: int
    headroom: bool
    outside_bytes: int
    limit_bytes: int
    free_at_peak: int
    steps_to_limit: Optional[int]
    oom: bool
    new_ooms: int


def judge_step(history: Sequence[dict], peak_allocated_before: int = 0,
               rules: Optional[StepRules] = None) -> StepJudgment:
    """Every step-end rule at the newest of ``history`` (dicts with the keys of SAMPLE_FIELDS,
    oldest first; ``step_peak_reserved`` -1 and ``limit`` 0 when unknown)."""
    lib, _ = _lib.load()
    n = len(history)
    flat = []
    for index, sample in enumerate(history):
        for name in SAMPLE_FIELDS:
            value = sample.get(name, -1 if name == "step_peak_reserved" else 0)
            if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:  # the common case is one check
                value = _whole(f"history[{index}].{name}", value, _INT64_MIN, _INT64_MAX)
            flat.append(value)
    # One copy into the C array (the monitor calls this at every step end).
    samples = (_lib.StepSampleStruct * n).from_buffer_copy(array.array("q", flat)) if n else (_lib.StepSampleStruct * 0)()
    _whole("peak_allocated_before", peak_allocated_before, _INT64_MIN, _INT64_MAX)
    rules_struct = (rules or StepRules())._struct()
    out = _lib.StepJudgmentStruct()
    out.struct_size = ctypes.sizeof(_lib.StepJudgmentStruct)
    _check(lib, lib.rlmem_judge_step(samples, n, int(peak_allocated_before), ctypes.byref(rules_struct),
                                     ctypes.byref(out)), "rlmem_judge_step")
    return StepJudgment(
        leak=_verdict(out.leak), leak_count_before=out.leak_count_before, peak_allocated_seen=out.peak_allocated_seen,
        unused_reserved=out.unused_reserved, fragmented=bool(out.fragmented), fragmentation=bool(out.fragmentation),
        fragmentation_growth=out.fragmentation_growth, fragmentation_steps=out.fragmentation_steps,
        alloc_retries=bool(out.alloc_retries), new_alloc_retries=out.new_alloc_retries, headroom=bool(out.headroom),
        outside_bytes=out.outside_bytes, limit_bytes=out.limit_bytes, free_at_peak=out.free_at_peak,
        steps_to_limit=None if out.steps_to_limit < 0 else int(out.steps_to_limit), oom=bool(out.oom),
        new_ooms=out.new_ooms)


def judge_imbalance(figures: Sequence[int], fraction: float, min_bytes: int) -> tuple[bool, int, int]:
    """(imbalanced, index of the first largest, index of the first smallest) of one figure across ranks."""
    lib, _ = _lib.load()
    values = _int_series("figures", figures, _INT64_MIN, _INT64_MAX)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise InvalidArgumentError(f"fraction must be in [0, 1], not {fraction!r}")
    _whole("min_bytes", min_bytes, 0, _INT64_MAX)
    array = (ctypes.c_int64 * len(values))(*values)
    imbalanced, high, low = ctypes.c_int(), ctypes.c_size_t(), ctypes.c_size_t()
    _check(lib, lib.rlmem_judge_imbalance(array, len(values), float(fraction), int(min_bytes), ctypes.byref(imbalanced),
                                          ctypes.byref(high), ctypes.byref(low)), "rlmem_judge_imbalance")
    return bool(imbalanced.value), int(high.value), int(low.value)
