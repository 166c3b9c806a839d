"""rlmem.leak_check(): the one leak rule of librlmem, applied to series from Python."""

from __future__ import annotations

import pytest

MiB = 1024**2


def test_growth_with_new_allocations_in_two_steps_is_a_leak(rlmem):
    verdict = rlmem.leak_check([100, 100, 150, 200], counts=[3, 3, 4, 5])
    assert verdict == rlmem.LeakVerdict(True, 2, 2, 50), f"saw {verdict}"
    assert bool(verdict) is True


def test_the_bundled_leaks_series_is_a_leak_from_step_1(rlmem, snapshot):
    # The leaking site's live bytes at each step end, as inspect reported them.
    series = rlmem.inspect(snapshot("grpo_leak_logits.pickle.zst"))["leaks"][0]["bytes_at_step_end"]
    verdict = rlmem.leak_check(series, counts=[0, 1, 2, 3, 4])
    assert verdict == rlmem.LeakVerdict(True, 1, 4, 49_152_000), f"saw {verdict}"


def test_growth_in_step_1_alone_is_not_a_leak(rlmem):
    # AdamW state created by the first optimizer step.
    verdict = rlmem.leak_check([1000, 1500, 1500, 1500], counts=[10, 12, 12, 12])
    assert verdict == rlmem.LeakVerdict(False, 0, 0, 0), f"saw {verdict}"
    assert not verdict


def test_bytes_growth_without_new_allocations_needs_four_steady_steps(rlmem):
    # A tensor replaced by a larger one each step (torch.cat onto a kept tensor): count constant.
    flat = [5]*6
    assert not rlmem.leak_check([0, 10, 20, 30], counts=flat[:4]), "three growing steps without new allocations"
    verdict = rlmem.leak_check([0, 10, 20, 30, 40], counts=flat[:5])
    assert verdict == rlmem.LeakVerdict(True, 1, 4, 10), f"four steady steps: saw {verdict}"
    # Unsteady: the smallest growth below half the largest.
    assert not rlmem.leak_check([0, 10, 12, 40, 41], counts=flat[:5])


def test_a_drop_at_the_end_ends_the_leak(rlmem):
    assert not rlmem.leak_check([0, 10, 20, 30, 25], counts=[1, 2, 3, 4, 4])


def test_without_counts_only_steady_growth_counts(rlmem):
    assert not rlmem.leak_check([0, 0, 10, 20])
    assert rlmem.leak_check([0, 10, 20, 30, 40]).bytes_per_step == 10


def test_short_and_empty_series(rlmem):
    assert rlmem.leak_check([]) == rlmem.LeakVerdict(False, 0, 0, 0)
    assert not rlmem.leak_check([1, 2])


def test_extreme_values_stay_exact(rlmem):
    low, high = -(2**63), 2**63 - 1
    verdict = rlmem.leak_check([low, low + 1, 0, high, high], counts=None)
    assert not verdict
    verdict = rlmem.leak_check([low, 0, high // 2, high], counts=[0, 1, 2, 3])
    assert verdict.leaking and verdict.first_step == 1 and verdict.steps == 3


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
    series = torch.tensor([100, 100, 150, 200])
    assert rlmem.leak_check(series.tolist(), counts=range(3, 7)).leaking
    assert rlmem.leak_check((int(v) for v in series), counts=[3, 3, 4, 5]).bytes_per_step == 50
