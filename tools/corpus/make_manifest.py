#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes testdata/wild/MANIFEST.json: for every snapshot listed in tools/corpus/sources.tsv,
where it came from and the independent reference's figures (tools/corpus/reference.py).

  tools/corpus/make_manifest.py             # reads testdata/wild/{files,local}/<name>.pickle.zst

A listed file that is not present keeps its entry of the committed manifest (its figures were
made where it was; fetch.py gets it back), with its provenance and replay column refreshed from
sources.tsv; a file neither present nor in the manifest is an error. The test
(tests/corpus/wild_test.py) checks whichever files a checkout has.
"""
import hashlib
import json
import sys
from pathlib import Path

import reference

ROOT = Path(__file__).resolve().parents[2]


def torch_hint(figures):
    """What the file's own keys say of the torch that wrote it (None: they say nothing)."""
    keys = set(figures["event_keys"])
    if figures["layout"] == "segment list":
        return "any (a bare list of segments: torch.cuda.memory_snapshot(), no trace)"
    if figures["blocks_carry_history"]:
        return "2.0-2.1 (blocks carry 'history')"
    if "compile_context" in keys or "user_metadata" in keys:
        return ">=2.6 (events carry compile_context or user_metadata)"
    if figures["has_time_us"] is False:
        return "<=2.1 (events carry no time_us)"
    return None


def default_device(devices):
    """The device with the most data: the most events, then the most reserved at the dump."""
    ranked = sorted(devices, key=lambda d: (d["events"], d["reserved_at_dump"]), reverse=True)
    if len(ranked) > 1 and (ranked[0]["events"], ranked[0]["reserved_at_dump"]) == (ranked[1]["events"], ranked[1]["reserved_at_dump"]):
        return None   # a tie: no one device to expect
    return ranked[0]["device"] if ranked else None


def main():
    manifest_path = ROOT / "testdata/wild/MANIFEST.json"
    committed = {e["file"]: e for e in json.loads(manifest_path.read_text())["snapshots"]} if manifest_path.exists() else {}
    entries = []
    for line in (ROOT / "tools/corpus/sources.tsv").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t") + ["", ""]
        name, repo, commit, path, licence, torch, replay = fields[:7]
        carried = ROOT / "testdata/wild/files" / f"{name}.pickle.zst"
        local = carried if carried.is_file() else ROOT / "testdata/wild/local" / f"{name}.pickle.zst"
        source = {"repo": repo, "path": path, "commit": commit, "licence": licence}
        if not local.is_file():
            if f"{name}.pickle.zst" not in committed:
                print(f"{name}: not in testdata/wild/local/ and not in the manifest", file=sys.stderr)
                return 1
            kept = committed[f"{name}.pickle.zst"]
            kept.update(source=source, replay_divergence=replay or None)
            entries.append(kept)
            continue
        data = reference.read_bytes(local)
        figures = reference.describe(data)
        entries.append({
            "file": f"{name}.pickle.zst",
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "source": source,
            "torch": torch or None,
            "torch_from_file": torch_hint(figures),
            "os": figures["os"],
            "layout": figures["layout"],
            "has_time_us": figures["has_time_us"],
            "blocks_carry_history": figures["blocks_carry_history"],
            "device_count": figures["device_count"],
            "default_device": default_device(figures["devices"]),
            "devices": figures["devices"],
            # Why replay does not reproduce every recorded segment event; None: it must.
            "replay_divergence": replay or None,
        })
    out = {
        "what": "Real snapshots from public repositories and an independent reference's figures "
                "(tools/corpus/reference.py); those with a licence that allows it are carried in testdata/wild/files/, "
                "the others are not committed (testdata/wild/local/; testdata/wild/README.md).",
        "snapshots": entries,
    }
    manifest_path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(entries)} snapshots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
