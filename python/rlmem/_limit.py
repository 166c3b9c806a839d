"""The memory limit a process really had on a device, for OOM verdicts and the monitor's headroom.

A snapshot proves only a range for the limit (it never records a memory fraction); inside the job
the limit can be read. In this order:

1. ``torch.cuda.get_per_process_memory_fraction(device)`` below 1, times the device's total
   memory: exactly torch's own cap (``fraction * total``, as the caching allocator computes it);
2. the ``... allowed`` figure of torch's OOM message (printed only under a fraction, rounded to
   two decimals);
3. the device's free memory plus what this process's allocator holds.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from ._format import format_bytes

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_ALLOWED = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB) allowed")


class ProcessLimit(NamedTuple):
    bytes: int
    #: where the figure came from, for the verdict line: "set_per_process_memory_fraction(0.0333)
    #: x 79.2 GiB", "torch's OOM message (2.51 GiB allowed)", "free device memory + reserved"
    source: str
    #: whether the figure is exact (the fraction) or a reading (the message's rounding, the free memory)
    exact: bool


def fraction_limit(cuda: Any, device: Optional[int] = None, total: Optional[int] = None) -> Optional[ProcessLimit]:
    """Torch's per-process memory fraction of the device, when one below 1 is set; ``total``: the
    device's memory when the caller has just read it."""
    fraction_of = getattr(cuda, "get_per_process_memory_fraction", None)
    if fraction_of is None:
        return None
    try:
        fraction = float(fraction_of(device) if device is not None else fraction_of())
        if total is None:
            total = int(cuda.mem_get_info(device)[1] if device is not None else cuda.mem_get_info()[1])
    except Exception:  # an older torch, a stand-in without it, no device
        return None
    if not 0 < fraction < 1 or total <= 0:
        return None
    return ProcessLimit(int(fraction * total), f"set_per_process_memory_fraction({fraction:.4g}) x {format_bytes(total)}", True)


def allowed_in_message(message: str) -> Optional[ProcessLimit]:
    """The ``2.51 GiB allowed`` figure of torch's OOM message."""
    found = _ALLOWED.search(message)
    if found is None:
        return None
    value = int(float(found.group(1)) * _UNITS[found.group(2)])
    return ProcessLimit(value, f"torch's OOM message ({found.group(1)} {found.group(2)} allowed)", False)


def process_limit(cuda: Any, device: Optional[int] = None, error: Optional[BaseException] = None) -> Optional[ProcessLimit]:
    """The limit the process had on ``device``, by the first source that answers (the module's
    docstring), or None when none does."""
    found = fraction_limit(cuda, device)
    if found is None and error is not None:
        found = allowed_in_message(str(error))
    if found is not None:
        return found
    try:
        free = int(cuda.mem_get_info(device)[0] if device is not None else cuda.mem_get_info()[0])
        held = int(cuda.memory_reserved(device) if device is not None else cuda.memory_reserved())
    except Exception:
        return None
    return ProcessLimit(free + held, "free device memory + what this process reserved", False)
