"""Naming a leak: record the next steps, dump a snapshot, run rlmem.inspect on it, and find the
Python object that holds the leaked tensors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import _dist
from .._format import format_bytes, format_signed_bytes
from ..core import inspect
from ..errors import RlmemError
from ..holders import find_holders
from ..recording import record
from .alerts import Alert
from .log import logger
from .sampling import _Sample


@dataclass
class _LeakRecording:
    recorder: record
    remaining: int
    started_step: int
    steps: int
    bytes_per_step: int
    since_step: int


class LeakRecording:
    """The recording StepMonitor starts on a leak alert (``self._recording``) and the alert that
    names the site when it is over."""

    def _start_recording(self, sample: _Sample, per_step: int, since: int, steps: int) -> None:
        recorder = record(self.snapshot_dir, keep=1_000_000, max_entries=self.record_max_entries,
                          stacks=self.record_stacks, on_oom=False, dump_at_exit=False, cuda=self._cuda)
        try:
            recorder.__enter__()
        except Exception as failure:
            logger.warning("rlmem: could not start recording to name the leak's site: %s", failure)
            self._leak_recorded = True
            return
        self._leak_recorded = True
        self._recording = _LeakRecording(recorder, steps, sample.step, 0, per_step, since)

    def _advance_recording(self, number: int) -> list[Alert]:
        recording = self._recording
        recording.recorder.step()
        recording.steps += 1
        recording.remaining -= 1
        if recording.remaining > 0:
            return []
        self._recording = None
        rank, _ = _dist.rank_and_world()
        try:
            path = recording.recorder.dump(f"leak-step{number:06d}")
        except Exception as failure:
            recording.recorder.__exit__(None, None, None)
            message = f"leak: could not write the snapshot to name the allocation site: {failure}"
            return [Alert("leak", rank, message, number)]
        recording.recorder.__exit__(None, None, None)
        return [self._site_alert(rank, number, path, recording)]

    def _site_alert(self, rank: int, number: int, path: str, recording: _LeakRecording) -> Alert:
        alert = Alert("leak", rank, "", number, bytes_per_step=recording.bytes_per_step,
                      since_step=recording.since_step, snapshot=path)
        try:
            report = inspect(path)
        except RlmemError as failure:
            alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                             f" {recording.since_step}; the snapshot {path} could not be inspected: {failure}")
            return alert
        leaks = report.get("leaks") or []
        if leaks:
            top = leaks[0]
            site = top["site"]
            if top.get("user_frame") and top["user_frame"] not in site:
                site += f" <- {top['user_frame']}"
            self.leak_site, self.leak_snapshot = site, path
            alert.site = site
            alert.holder = self._name_holder(top)
            kept_by = f"; {alert.holder}" if alert.holder else ""
            others = f"; {len(leaks) - 1} more leak{'s' if len(leaks) > 2 else ''} in it" if len(leaks) > 1 else ""
            found = (report.get("steps") or {}).get("count", 0)
            alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                             f" {recording.since_step} comes from {site}{kept_by}: in a recording of the next"
                             f" {recording.steps} steps it grew {format_signed_bytes(top['bytes_per_step'])}/step over"
                             f" {top['steps']} of the {found} step ends rlmem inspect found, holding"
                             f" {format_bytes(top['live_bytes_at_end'])} at the last (rlmem inspect {path}){others}")
            return alert
        steps = report.get("steps") or {}
        method = steps.get("method") or "no method"
        alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                         f" {recording.since_step}, but no allocation site grew at every step end of the"
                         f" {recording.steps} recorded steps (rlmem inspect found {steps.get('count', 0)} step ends by"
                         f" {method}): the growth may come from memory allocated before the recording, or stopped;"
                         f" snapshot: {path}")
        return alert

    def _name_holder(self, leak: dict) -> Optional[str]:
        """The Python object that keeps the leak's live blocks alive ("kept by `trainer.metrics`,
        a list of 12 tensors (46.9 MiB)"), found within ``holder_budget`` seconds, or None."""
        blocks = [(block["address"], block["size"]) for block in leak.get("live_blocks") or []]
        if not blocks or self.holder_budget <= 0:
            return None
        try:
            found = find_holders(blocks, budget_seconds=self.holder_budget, max_results=1, roots=self.holder_roots)
        except Exception as failure:  # naming the holder must never stop training
            logger.warning("rlmem: could not name the object that holds the leak: %s", failure)
            return None
        if not found.holders:
            return None
        text = str(found.holders[0])
        if not found.complete:
            text += f" (the search stopped after {found.seconds:.1f} s: {found.reason})"
        return text
