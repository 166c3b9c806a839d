"""The words of each StepMonitor alert, from a sample's figures."""

from __future__ import annotations

import os
from typing import Optional

from .._format import format_bytes, format_percent, format_signed_bytes
from .sampling import _Sample


class Messages:
    """One message per alert kind; ``_headroom_message`` reads the monitor's ``reset_peak`` and
    ``headroom``."""

    @staticmethod
    def _forecast(sample: _Sample) -> str:
        """ "at this rate the step peak passes the 79.2 GiB card in about 880 steps" """
        if sample.steps_to_limit is None:
            return ""
        what = f"the {format_bytes(sample.limit)} limit" if sample.limit else f"the {format_bytes(sample.device_total)} card"
        if sample.steps_to_limit <= 0:
            return f"; the step peak is past {what} already"
        steps = sample.steps_to_limit
        return f"; at this rate the step peak passes {what} in about {steps:,} step{'s' if steps != 1 else ''}"

    @classmethod
    def _leak_message(cls, sample: _Sample, per_step: int, since: int, allocations_before: Optional[int]) -> str:
        grown = sample.step - since + 1
        counts = ""
        if allocations_before is not None:
            counts = f", live allocations {allocations_before:,} -> {sample.allocations:,}"
        return (f"leak: allocated memory at step end grows {format_signed_bytes(per_step)}/step since step {since}"
                f" ({grown} steps{counts}); now {format_bytes(sample.allocated)} allocated,"
                f" {format_bytes(sample.reserved)} reserved of {format_bytes(sample.device_total)}{cls._forecast(sample)}")

    @staticmethod
    def _fragmentation_message(sample: _Sample, growth: int, steps: int) -> str:
        fraction = sample.unused_reserved / sample.reserved if sample.reserved else 0.0
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
        hint = ("; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so free space joins into one block"
                if "expandable_segments:true" not in conf.replace(" ", "").lower() else
                "; expandable segments are on already: look for tensors whose sizes change every step")
        return (f"fragmentation: {format_bytes(sample.unused_reserved)} reserved beyond the largest allocated peak"
                f" ({format_bytes(sample.peak_allocated_seen)}), {format_percent(fraction)} of"
                f" {format_bytes(sample.reserved)} reserved, {format_signed_bytes(growth)} over the last {steps} steps;"
                f" {format_bytes(sample.inactive_split)} sits in free pieces of split blocks{hint}")

    @staticmethod
    def _retries_message(sample: _Sample, new: int, since_step: int) -> str:
        return (f"alloc_retries: cudaMalloc failed {new} time{'s' if new != 1 else ''} since step {since_step}"
                f" ({sample.num_alloc_retries} in all) and the allocator emptied its cache to retry: the job runs at"
                f" the memory limit ({format_bytes(sample.reserved)} reserved, {format_bytes(sample.device_free)} free"
                f" of {format_bytes(sample.device_total)}); each retry synchronizes and slows the step, and the next"
                f" larger request may OOM")

    def _headroom_message(self, sample: _Sample) -> str:
        outside = max(0, sample.device_total - sample.device_free - sample.reserved)
        left = sample.free_at_peak
        limit = sample.limit or sample.device_total
        fraction = left / limit if limit else 0.0
        peak_word = "the step's" if self.reset_peak else "the"
        where = (f"of the {format_bytes(limit)} limit (a memory fraction of the {format_bytes(sample.device_total)}"
                 f" device)" if sample.limit else
                 f"plus {format_bytes(outside)} outside PyTorch's cache, {{left}} of the {format_bytes(sample.device_total)}"
                 f" device")
        where = where.replace("{left}", f"{format_bytes(max(left, 0))} ({format_percent(max(fraction, 0.0))})")
        text = (f"headroom: at {peak_word} reserved peak ({format_bytes(sample.step_peak_reserved)}, peak allocated"
                f" {format_bytes(sample.step_peak_allocated)}) ")
        if sample.limit:
            text += (f"{format_bytes(max(left, 0))} ({format_percent(max(fraction, 0.0))}) is left {where}")
        else:
            text += f"{where} is left"
        if fraction < self.headroom:
            text += f", under the {format_percent(self.headroom)} margin: a longer sequence or a larger batch may OOM"
        if sample.steps_to_limit is not None:
            text += self._forecast(sample).replace("; at this rate", "; at the leak's rate")
        return text

    @staticmethod
    def _oom_message(sample: _Sample, new: int, since_step: int) -> str:
        capped = ""
        if sample.limit and sample.limit < sample.device_total:
            capped = (f"; the process is capped at {format_bytes(sample.limit)} (a memory fraction), so the free device"
                      f" memory was not its to take")
        return (f"oom: the allocator raised {new} out-of-memory error{'s' if new != 1 else ''} since step"
                f" {since_step} ({sample.num_ooms} in all; {format_bytes(sample.reserved)} reserved,"
                f" {format_bytes(sample.device_free)} free of {format_bytes(sample.device_total)}{capped}); wrap the loop in"
                f" rlmem.record(...) to get the snapshot and rlmem's verdict")
