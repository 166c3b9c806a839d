"""Where a StepMonitor's samples and alerts go: the JSON-lines log (docs/schema/steplog.schema.json),
the ``logging`` logger "rlmem", ``warnings`` and ``on_alert``."""

from __future__ import annotations

import json
import logging
import os
import warnings
from typing import Any, Optional

from .. import _dist
from .alerts import Alert, AlertWarning
from .sampling import _Sample

SCHEMA = "rlmem.steplog/1"
logger = logging.getLogger("rlmem")


class Output:
    """The log file (opened on first use, per rank) and the alerts' other destinations."""

    def _log_file_for(self, rank: int, world: int):
        if self.log_path is None:
            return None
        if self._log_file is not None and self._log_opened_for == rank:
            return self._log_file
        if world > 1 and rank != 0 and "{rank}" not in self.log_path:
            return None
        path = self.log_path.replace("{rank}", str(rank))
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = open(path, "a", encoding="utf-8", buffering=1)
        self._log_opened_for = rank
        return self._log_file

    def _write(self, sample: _Sample, alerts: list[Alert], ranks: Optional[list[dict]]) -> None:
        # A log that cannot be written never stops training: one warning, then the monitor goes on
        # without it (alerts still reach logging and on_alert).
        if self._log_failed:
            return
        try:
            self._write_line(sample, alerts, ranks)
        except OSError as failure:
            self._log_failed = True
            logger.warning("rlmem.StepMonitor: cannot write the log %s (%s); going on without it", self.log_path, failure)

    def _write_line(self, sample: _Sample, alerts: list[Alert], ranks: Optional[list[dict]]) -> None:
        out = self._log_file_for(sample.rank, sample.world_size)
        if out is None:
            return
        line: dict[str, Any] = {
            "schema": SCHEMA, "time": round(sample.time, 6), "step": sample.step,
            "step_seconds": None if sample.step_seconds is None else round(sample.step_seconds, 6),
            "rank": sample.rank, "world_size": sample.world_size, "device": sample.device,
            "allocated": sample.allocated, "reserved": sample.reserved, "active": sample.active,
            "inactive_split": sample.inactive_split, "step_peak_allocated": sample.step_peak_allocated,
            "step_peak_reserved": sample.step_peak_reserved, "peak_is_per_step": self.reset_peak,
            "allocations": sample.allocations, "num_alloc_retries": sample.num_alloc_retries,
            "num_ooms": sample.num_ooms, "device_free": sample.device_free, "device_total": sample.device_total,
            "steps_to_limit": sample.steps_to_limit,
            "alerts": [alert.to_json() for alert in alerts],
        }
        if sample.limit:
            line["limit"] = sample.limit
        if ranks is not None:
            line["ranks"] = ranks
        if sample.tags is not None:
            line["runtime_tags"] = sample.tags
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.flush()

    def _emit(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        rank, world = _dist.rank_and_world()
        quiet = world > 1 and rank != 0 and self.gather_every > 0  # rank 0 reports them
        for alert in alerts:
            self.alerts.append(alert)
            if not quiet:
                logger.warning("%s", alert.message)
                if self.use_warnings:
                    warnings.warn(alert.message, AlertWarning, stacklevel=4)
            if self.on_alert is not None:
                self.on_alert(alert)

