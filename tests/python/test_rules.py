"""rlmem.judge_step / StepRules / judge_imbalance: librlmem's step-end rules from Python, the code
StepMonitor and `rlmem watch` both run."""

from __future__ import annotations

import pytest

MiB = 1024**2
GiB = 1024**3


def history(steps: int, leak_from: int | None = None, leak: int = 256 * MiB) -> list[dict]:
    out = []
    for step in range(1, steps + 1):
        kept = (step - leak_from + 1) * leak if leak_from is not None and step >= leak_from else 0
        out.append({"step": step, "allocated": 10 * GiB + kept, "reserved": 60 * GiB, "inactive_split": 0,
                    "step_peak_allocated": 55 * GiB + kept, "step_peak_reserved": 60 * GiB, "allocations": 500,
                    "num_alloc_retries": 0, "num_ooms": 0, "device_free": 19 * GiB, "device_total": 80 * GiB,
                    "limit": 0})
    return out


def test_a_leak_with_its_forecast(rlmem):
    judged = rlmem.judge_step(history(12, leak_from=8))
    assert judged.leak.leaking and judged.leak.first_step == 7 and judged.leak.bytes_per_step == 256 * MiB, judged.leak
    # The allocated peak (56.25 GiB) may grow into 80 - 1 GiB outside PyTorch: 22.75 GiB, 91 steps.
    assert judged.steps_to_limit == 91 and judged.headroom, judged
    assert not rlmem.judge_step(history(12, leak_from=8), rules=rlmem.StepRules(headroom_steps=50)).headroom


def test_no_leak_no_forecast(rlmem):
    judged = rlmem.judge_step(history(12))
    assert not judged.leak and judged.steps_to_limit is None and not judged.headroom, judged
    assert judged.free_at_peak == 19 * GiB and judged.outside_bytes == GiB, judged


def test_bad_rules_and_figures_are_refused_with_their_name(rlmem):
    with pytest.raises(rlmem.InvalidArgumentError, match=r"leak_window must be in \[3, 256\], not 2"):
        rlmem.StepRules(leak_window=2)
    with pytest.raises(rlmem.InvalidArgumentError, match="headroom_fraction must be a finite number"):
        rlmem.StepRules(headroom_fraction=float("nan"))
    with pytest.raises(rlmem.InvalidArgumentError, match=r"history\[0\].allocated = 18446744073709551616 is outside"):
        rlmem.judge_step([{"step": 1, "allocated": 2**64}])
    with pytest.raises(TypeError, match=r"history\[0\].reserved is a bool"):
        rlmem.judge_step([{"step": 1, "reserved": True}])


def test_empty_and_absurd_histories_give_a_result(rlmem):
    assert not rlmem.judge_step([]).leak
    extreme = [{"step": i, "allocated": (-1) ** i * (2**63 - 1), "reserved": -(2**63), "device_total": 2**63 - 1}
               for i in range(300)]
    judged = rlmem.judge_step(extreme)
    assert not judged.leak.leaking


def test_imbalance_names_the_first_largest_and_smallest(rlmem):
    from rlmem.rules import judge_imbalance

    assert judge_imbalance([30 * GiB, 42 * GiB, 29 * GiB, 42 * GiB], 0.2, 512 * MiB) == (True, 1, 2)
    assert judge_imbalance([30 * GiB, 31 * GiB], 0.2, 512 * MiB)[0] is False
    with pytest.raises(rlmem.InvalidArgumentError, match="fraction"):
        judge_imbalance([1], 1.5, 0)
