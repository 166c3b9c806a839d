"""Human sizes as the rlmem command prints them (format_bytes in include/rlmem/base/format.hpp, the
reference): 1023 B, 1.50 KiB, 46.9 MiB. testdata/format/bytes_cases.json holds the cases this,
the C++ and the page's copy print alike."""

from __future__ import annotations

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(count: int) -> str:
    """``format_bytes(49_178_624) == "46.9 MiB"``: two decimals below 10, one from 10 up."""
    sign = "-" if count < 0 else ""
    magnitude = abs(int(count))
    if magnitude < 1024:
        return f"{sign}{magnitude} B"
    scaled = magnitude / 1024.0
    unit = 0
    while scaled >= 1024.0 and unit + 1 < len(_UNITS):
        scaled /= 1024.0
        unit += 1
    return f"{sign}{scaled:.2f} {_UNITS[unit]}" if scaled < 10.0 else f"{sign}{scaled:.1f} {_UNITS[unit]}"


def format_signed_bytes(count: int) -> str:
    """``+46.9 MiB`` / ``-1.00 GiB``."""
    return ("+" if count >= 0 else "") + format_bytes(count)


def format_percent(fraction: float) -> str:
    return f"{100.0 * fraction:.1f}%"
