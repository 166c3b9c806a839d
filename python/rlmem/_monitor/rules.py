"""The alerts of this rank's samples: librlmem's step-end rules (rlmem.judge_step) applied to the
monitor's history, with the repeats and the leak's recording decided here."""

from __future__ import annotations

from .._format import format_bytes
from ..rules import judge_step
from .alerts import ALERT_KINDS, Alert, _Repeat
from .sampling import _Sample


class LocalRules:
    """The alerts of one sample of this rank."""

    def _local_alerts(self, sample: _Sample) -> list[Alert]:
        # Every rule is librlmem's (rlmem.judge_step, the code `rlmem watch` runs); the monitor
        # keeps the figures, the repeats and the words.
        alerts: list[Alert] = []
        history = list(self._history)
        previous = history[-2] if len(history) >= 2 else None
        judged = judge_step([s.figures() for s in history], self._peak_before_history, self._rules)
        sample.peak_allocated_seen = judged.peak_allocated_seen
        sample.unused_reserved = judged.unused_reserved
        sample.free_at_peak = judged.free_at_peak
        sample.steps_to_limit = judged.steps_to_limit

        leak = judged.leak
        if leak.leaking:
            first = history[leak.first_step]
            per_step = leak.bytes_per_step
            sample.flags |= 1 << ALERT_KINDS.index("leak")
            sample.leak_bytes_per_step = per_step
            sample.leak_since_step = first.step
            if self._should_raise("leak", sample.rank, per_step) or not self._leak_alerted:
                alerts.append(self._leak_alert(sample, per_step, first.step, judged.leak_count_before))
            self._leak_alerted = True
            self._leak_last_rate = per_step
        elif self._leak_alerted:
            # Said on the step end where the rule stops holding: within 3 steps of the growth's end.
            self._leak_alerted = False
            self._repeats.pop(("leak", sample.rank), None)
            alerts.append(self._leak_cleared_alert(sample, leak))
        elif self._recording is None and self.samples - self._repeats.get(("leak", sample.rank), _Repeat()).last_seen > self.rearm_after:
            # The leak is over: a new one later is recorded, and named, afresh.
            self._leak_recorded = False
            self.leak_site = self.leak_snapshot = None

        if judged.fragmentation:
            sample.flags |= 1 << ALERT_KINDS.index("fragmentation")
            if self._should_raise("fragmentation", sample.rank, sample.unused_reserved):
                alerts.append(Alert("fragmentation", sample.rank,
                                    self._fragmentation_message(sample, judged.fragmentation_growth,
                                                                sample.step - history[-1 - judged.fragmentation_steps].step),
                                    sample.step))
        if judged.alloc_retries:
            sample.flags |= 1 << ALERT_KINDS.index("alloc_retries")
            if self._should_raise("alloc_retries", sample.rank, sample.num_alloc_retries):
                alerts.append(Alert("alloc_retries", sample.rank,
                                    self._retries_message(sample, judged.new_alloc_retries, previous.step), sample.step))
        if judged.headroom:
            sample.flags |= 1 << ALERT_KINDS.index("headroom")
            if self._should_raise("headroom", sample.rank, max(sample.free_at_peak, 0)):
                alerts.append(Alert("headroom", sample.rank, self._headroom_message(sample), sample.step,
                                    steps_to_limit=sample.steps_to_limit))
        if judged.oom:
            sample.flags |= 1 << ALERT_KINDS.index("oom")
            if self._should_raise("oom", sample.rank, sample.num_ooms, any_change=True):
                alerts.append(Alert("oom", sample.rank, self._oom_message(sample, judged.new_ooms, previous.step),
                                    sample.step))
        return alerts

    def _leak_cleared_alert(self, sample: _Sample, leak) -> Alert:
        history = list(self._history)
        if leak.stopped and leak.events:
            last = history[leak.last_event].step
            why = (f"step-end allocated last rose at step {last} and has not grown since"
                   f" ({format_bytes(sample.allocated)} now): a cache that filled, or a buffer grown to the longest"
                   f" length seen, not a leak")
        else:
            why = f"step-end allocated no longer grows ({format_bytes(sample.allocated)} now)"
        return Alert("leak", sample.rank, f"leak: cleared at step {sample.step}: {why}", sample.step,
                     bytes_per_step=0, cleared=True)

    # inspect names a site whose own allocation count does not grow with it (a tensor re-made
    # larger each step, `history = torch.cat([history, x])`) only after four growing step ends.
    FLAT_COUNT_RECORD_STEPS = 5

    def _leak_alert(self, sample: _Sample, per_step: int, since: int, allocations_before: int) -> Alert:
        message = self._leak_message(sample, per_step, since, allocations_before)
        alert = Alert("leak", sample.rank, message, sample.step, bytes_per_step=per_step, since_step=since,
                      steps_to_limit=sample.steps_to_limit)
        if self.leak_site is not None:
            alert.site = self.leak_site
            alert.snapshot = self.leak_snapshot
            alert.message += f"; the growing allocation site (from {self.leak_snapshot}): {self.leak_site}"
        elif self.record_on_leak and not self._leak_recorded and self._recording is None:
            steps = self.record_on_leak
            if sample.allocations - allocations_before < sample.step - since + 1:  # fewer new allocations than steps
                steps = max(steps, self.FLAT_COUNT_RECORD_STEPS)
            self._start_recording(sample, per_step, since, steps)
            alert.message += (f"; recording the next {steps} steps to name the allocation site"
                              f" (snapshot in {self.snapshot_dir})")
        return alert
