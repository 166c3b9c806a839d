"""rlmem.leak_check(): librlmem's growth rule (the StepMonitor's), applied to series from Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MiB = 1024**2
GiB = 1024**3
MATRIX = Path(__file__).resolve().parents[2] / "testdata" / "monitor" / "matrix"


def flat_then(kept_per_step: list[int], level: int = GiB, quiet: int = 6) -> list[int]:
    """`quiet` flat step ends at `level`, then the leak's bytes kept step by step."""
    series = [level] * quiet
    total = 0
    for kept in kept_per_step:
        total += kept
        series.append(level + total)
    return series


def test_three_step_ends_that_rise_above_a_quiet_series_are_a_leak(rlmem):
    verdict = rlmem.leak_check(flat_then([10 * MiB] * 3))
    assert verdict.leaking and bool(verdict), f"saw {verdict}"
    assert (verdict.first_step, verdict.steps, verdict.bytes_per_step) == (6, 3, 10 * MiB), f"saw {verdict}"
    assert (verdict.events, verdict.period, verdict.stopped) == (3, 1, False), f"saw {verdict}"
    assert not rlmem.leak_check(flat_then([10 * MiB] * 2)), "two rises are not yet a leak"


def test_growth_into_one_tensor_needs_no_new_allocations(rlmem):
    # history = torch.cat([history, x]): the count stays flat; the rule reads no counts.
    series = flat_then([20 * MiB] * 3)
    assert rlmem.leak_check(series, counts=[7] * len(series)).leaking


def test_a_leak_every_fourth_step_is_two_alike_rises(rlmem):
    verdict = rlmem.leak_check(flat_then([8 * MiB, 0, 0, 0, 8 * MiB], quiet=10))
    assert verdict.leaking, f"saw {verdict}"
    assert (verdict.first_step, verdict.period, verdict.bytes_per_step) == (10, 4, 2 * MiB), f"saw {verdict}"
    # Unlike rises four steps apart are a buffer that grew to new longest lengths.
    assert not rlmem.leak_check(flat_then([8 * MiB, 0, 0, 0, 20 * MiB], quiet=10))


def test_a_cache_that_filled_is_cleared_within_three_steps(rlmem):
    filling = flat_then([30 * MiB] * 4)
    assert rlmem.leak_check(filling).leaking, "an alert while it fills is allowed"
    assert rlmem.leak_check(filling + [filling[-1]] * 2).leaking
    assert not rlmem.leak_check(filling + [filling[-1]] * 3), "three steps after it stopped, the alert is gone"


def test_growth_in_step_1_alone_is_not_a_leak(rlmem):
    # AdamW state created by the first optimizer step.
    assert not rlmem.leak_check([1000, 1500, 1500, 1500], counts=[10, 12, 12, 12])


def test_a_slow_leak_of_0_03_percent_a_step_is_found(rlmem):
    level = 3800 * MiB  # the case: 1.2 MB a step on a 3.8 GB job, a few KB of jitter before it
    series = flat_then([0] * 0, level=level, quiet=8)
    series[6] += 3 * 1024
    series += [level + 1_200_000 * k for k in range(1, 4)]
    verdict = rlmem.leak_check(series)
    assert verdict.leaking and verdict.first_step == 8, f"saw {verdict}"
    assert verdict.bytes_per_step == 1_200_000, f"expected 1,200,000 B/step (the series' own slope), saw {verdict}"


@pytest.mark.parametrize("run", sorted(p.name for p in MATRIX.glob("*.json")))
def test_the_recorded_matrix(rlmem, run):
    """Every run recorded on the H100 (testdata/monitor/matrix/), replayed step end by step end
    through the rule over the newest 64: leaks alerted within 5 step ends of their start with the
    start within 2 steps; runs that do not leak never alerted, or only while a cache still grew
    and cleared within 3 steps of its last growth."""
    data = json.loads((MATRIX / run).read_text())
    allocated = [entry["allocated"] for entry in data["steps"]]
    steps = [entry["step"] for entry in data["steps"]]
    held = [entry.get("held_bytes", 0) for entry in data["steps"]]
    start = data["truth"].get("start_step")
    first_alert = None
    for end in range(len(allocated)):
        window = allocated[max(0, end - 63): end + 1]
        verdict = rlmem.leak_check(window)
        if not verdict.leaking:
            continue
        if data["leaking"]:
            assert steps[end] >= start, f"{run}: alert at step {steps[end]} before the leak began at {start}"
            if first_alert is None:
                first_alert = steps[end]
                since = steps[max(0, end - 63) + verdict.first_step]
                assert abs(since - start) <= 2, f"{run}: growth said to start at {since}, truth {start}"
        else:
            grew_lately = any(held[i] > held[i - 1] for i in range(max(1, end - 2), end + 1))
            assert grew_lately, f"{run}: alert at step {steps[end]} with nothing grown in the 3 step ends before"
    if data["leaking"]:
        assert first_alert is not None, f"{run}: the leak from step {start} was never alerted"
        assert first_alert - start + 1 <= 5, f"{run}: first alert at step {first_alert}, leak from {start}"


def test_bad_series_are_refused(rlmem):
    with pytest.raises(rlmem.InvalidArgumentError, match="counts has 2 values, bytes_series 3"):
        rlmem.leak_check([1, 2, 3], counts=[1, 2])
    with pytest.raises(rlmem.InvalidArgumentError, match=r"outside"):
        rlmem.leak_check([2**63])
    with pytest.raises(rlmem.InvalidArgumentError, match=r"counts\[0\] = -1 is outside"):
        rlmem.leak_check([1, 2, 3], counts=[-1, 2, 3])
    with pytest.raises(rlmem.InvalidArgumentError, match="not a whole number"):
        rlmem.leak_check([1.5, 2, 3])
    with pytest.raises(TypeError, match="not an integer"):
        rlmem.leak_check(["a", 2, 3])
    with pytest.raises(TypeError, match="bool"):
        rlmem.leak_check([True, 2, 3])


def test_accepts_any_iterable_of_ints(rlmem):
    torch = pytest.importorskip("torch")
    series = torch.tensor(flat_then([50] * 3, level=1000))
    assert rlmem.leak_check(series.tolist(), counts=range(3, 3 + len(series))).leaking
    assert rlmem.leak_check(int(v) for v in series).bytes_per_step == 50


def test_a_drop_at_the_end_ends_the_leak(rlmem):
    assert not rlmem.leak_check(flat_then([10 * MiB] * 4) + [GiB])


def test_short_empty_and_long_series(rlmem):
    assert not rlmem.leak_check([])
    assert not rlmem.leak_check([1, 2])
    # A million step ends: the newest 256 are judged, in well under a second.
    long = [GiB] * 1_000_000 + [GiB + k * MiB for k in range(1, 4)]
    verdict = rlmem.leak_check(long)
    assert verdict.leaking and verdict.first_step == 1_000_000, f"saw {verdict}"


def test_extreme_values_stay_exact(rlmem):
    low, high = -(2**63), 2**63 - 1
    verdict = rlmem.leak_check([low] * 5 + [low // 2, 0, high // 2])
    assert verdict.leaking and verdict.bytes_per_step == 2**62, f"saw {verdict}"
    assert not rlmem.leak_check([high, low, high, low, high, low])
    assert not rlmem.leak_check([high] * 10)
