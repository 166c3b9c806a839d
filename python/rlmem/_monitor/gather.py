"""Many ranks: every rank's figures and alert state gathered to rank 0, the alerts of other ranks
raised there, and the imbalance alert across ranks."""

from __future__ import annotations

import zlib
from typing import Optional

from .. import _dist
from .._format import format_bytes, format_percent
from ..rules import judge_imbalance
from .alerts import ALERT_KINDS, Alert
from .sampling import _Sample


def _pack_text(text: str, words: int) -> list[int]:
    raw = text.encode("utf-8")[: words * 8]
    raw = raw + b"\0" * (words * 8 - len(raw))
    return [int.from_bytes(raw[i: i + 8], "little", signed=True) for i in range(0, words * 8, 8)]


def _unpack_text(values: list[int]) -> str:
    raw = b"".join(int(v).to_bytes(8, "little", signed=True) for v in values)
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


# The gathered vector: one int64 per field, then the host name and the leak site as UTF-8 bytes.
_GATHER_FIELDS = ("rank", "device", "step", "allocated", "reserved", "inactive_split", "step_peak_allocated",
                  "step_peak_reserved", "num_alloc_retries", "num_ooms", "device_free", "device_total",
                  "allocations", "peak_allocated_seen", "unused_reserved", "free_at_peak", "flags",
                  "leak_bytes_per_step", "leak_since_step")
_HOST_WORDS = 8    # 64 bytes
_SITE_WORDS = 16   # 128 bytes
GATHER_BYTES = 8 * (len(_GATHER_FIELDS) + _HOST_WORDS + _SITE_WORDS)


class Gathering:
    """The gather of ``gather_every`` samples and what rank 0 makes of it."""

    def _gather(self, sample: _Sample) -> tuple[Optional[list[dict]], list[Alert]]:
        site = self.leak_site or ""
        values = [int(getattr(sample, name)) for name in _GATHER_FIELDS]
        values[_GATHER_FIELDS.index("flags")] = self._flags_since_gather | sample.flags
        values += _pack_text(_dist.hostname(), _HOST_WORDS) + _pack_text(site, _SITE_WORDS)
        self._flags_since_gather = 0
        rows = _dist.all_gather_int64(values)
        if rows is None or sample.rank != 0:
            return None, []
        ranks = []
        alerts: list[Alert] = []
        count = len(_GATHER_FIELDS)
        for row in rows:
            figures = dict(zip(_GATHER_FIELDS, row[:count]))
            host = _unpack_text(row[count: count + _HOST_WORDS])
            site = _unpack_text(row[count + _HOST_WORDS:])
            ranks.append({"rank": figures["rank"], "host": host, "device": figures["device"],
                          "allocated": figures["allocated"], "reserved": figures["reserved"],
                          "inactive_split": figures["inactive_split"],
                          "step_peak_allocated": figures["step_peak_allocated"],
                          "num_alloc_retries": figures["num_alloc_retries"], "num_ooms": figures["num_ooms"],
                          "device_free": figures["device_free"], "device_total": figures["device_total"]})
            if figures["rank"] != sample.rank:
                alerts += self._remote_alerts(sample.step, figures, host, site)
        alerts += self._imbalance_alerts(sample.step, ranks)
        return ranks, alerts

    def _remote_alerts(self, step: int, figures: dict[str, int], host: str, site: str) -> list[Alert]:
        rank = figures["rank"]
        where = f"rank {rank} ({host}, cuda:{figures['device']})" if host else f"rank {rank} (cuda:{figures['device']})"
        remote = _Sample(step=figures["step"], time=0.0, step_seconds=None, rank=rank, world_size=0,
                         device=figures["device"], allocated=figures["allocated"], reserved=figures["reserved"],
                         active=0, inactive_split=figures["inactive_split"],
                         step_peak_allocated=figures["step_peak_allocated"],
                         step_peak_reserved=figures["step_peak_reserved"], allocations=figures["allocations"],
                         num_alloc_retries=figures["num_alloc_retries"], num_ooms=figures["num_ooms"],
                         device_free=figures["device_free"], device_total=figures["device_total"],
                         peak_allocated_seen=figures["peak_allocated_seen"],
                         unused_reserved=figures["unused_reserved"], free_at_peak=figures["free_at_peak"])
        previous = self._previous_remote.get(rank, {})
        self._previous_remote[rank] = figures
        since = previous.get("step", 0)
        flags = figures["flags"]
        alerts: list[Alert] = []

        def flagged(kind: str) -> bool:
            return bool(flags & (1 << ALERT_KINDS.index(kind)))

        if flagged("leak") and figures["leak_bytes_per_step"] > 0:
            per_step, leak_since = figures["leak_bytes_per_step"], figures["leak_since_step"]
            figure_changed = self._should_raise("leak", rank, per_step, gathered=True)
            site_is_new = bool(site) and self._should_raise("leak_site", rank, zlib.crc32(site.encode()),
                                                            any_change=True, gathered=True)
            if figure_changed or site_is_new:
                message = self._leak_message(remote, per_step, leak_since, None)
                alert = Alert("leak", rank, f"{where}: {message}", step, bytes_per_step=per_step, since_step=leak_since)
                if site:
                    alert.site = site
                    alert.message += f"; the growing allocation site: {site}"
                alerts.append(alert)
        if flagged("fragmentation") and self._should_raise("fragmentation", rank, remote.unused_reserved, gathered=True):
            growth = remote.unused_reserved - previous.get("unused_reserved", remote.unused_reserved)
            alerts.append(Alert("fragmentation", rank,
                                f"{where}: {self._fragmentation_message(remote, growth, max(1, step - since))}", step))
        if flagged("alloc_retries") and self._should_raise("alloc_retries", rank, remote.num_alloc_retries, gathered=True):
            new = remote.num_alloc_retries - previous.get("num_alloc_retries", 0)
            alerts.append(Alert("alloc_retries", rank, f"{where}: {self._retries_message(remote, new, since)}", step))
        if flagged("headroom") and self._should_raise("headroom", rank, max(remote.free_at_peak, 0), gathered=True):
            alerts.append(Alert("headroom", rank, f"{where}: {self._headroom_message(remote)}", step))
        if flagged("oom") and self._should_raise("oom", rank, remote.num_ooms, any_change=True, gathered=True):
            new = remote.num_ooms - previous.get("num_ooms", 0)
            alerts.append(Alert("oom", rank, f"{where}: {self._oom_message(remote, new, since)}", step))
        return alerts

    def _imbalance_alerts(self, step: int, ranks: list[dict]) -> list[Alert]:
        alerts = []
        for key, words in (("step_peak_allocated", "peak allocated"), ("allocated", "allocated at step end")):
            imbalanced, high_index, low_index = judge_imbalance([row[key] for row in ranks], self.imbalance,
                                                                self.imbalance_bytes)
            if not imbalanced:
                continue
            high, low = ranks[high_index], ranks[low_index]
            spread = high[key] - low[key]
            if not self._should_raise(f"imbalance:{key}", -1, spread, gathered=True):
                continue
            alerts.append(Alert(
                "imbalance", high["rank"],
                f"imbalance: {words} ranges from {format_bytes(low[key])} (rank {low['rank']}) to"
                f" {format_bytes(high[key])} (rank {high['rank']}), {format_bytes(spread)} or"
                f" {format_percent(spread / high[key])} apart across {len(ranks)} ranks: rank {high['rank']} sets the"
                f" memory every rank needs and runs out first (uneven sequence lengths or batch split?)", step))
        return alerts
