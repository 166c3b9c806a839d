"""The wheel's rlmem on a GPU, in the venv tools/wheel/wheel_gpu_check.sh installed it into.

    V/bin/python wheel_gpu_check.py monitor OUT   # StepMonitor over a small loop, then rlmem.record
    V/bin/python wheel_gpu_check.py runtime OUT   # install(), a region, pause/resume, an OOM

Each writes OUT/<check>.json (what was seen, and "ok" with the reason when not) and exits 1 when a
check failed. The runtime runs in its own process: install() must come before any CUDA allocation.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

MiB = 1 << 20


def small_loop(torch, steps: int, on_step) -> list[float]:
    """A few optimizer steps of a two-layer MLP, with batches of changing size (what a monitor sees
    in RL fine-tuning: the allocation pattern moves from step to step)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        batch = torch.randn(256 + 128 * (step % 3), 1024, device="cuda")
        loss = (model(batch) - batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
        on_step(step)
    torch.cuda.synchronize()
    return losses


def check_monitor(out: Path) -> dict:
    import torch
    import rlmem

    result: dict = {"rlmem_file": rlmem.__file__, "library": rlmem.library_path(), "version": rlmem.version(),
                    "torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    log = out / "steps.jsonl"
    alerts = []
    monitor = rlmem.StepMonitor(str(log))
    small_loop(torch, 8, lambda step: alerts.extend(monitor.step()))
    monitor.close()
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    result["monitor"] = {"log_lines": len(lines), "last_line": lines[-1] if lines else None,
                         "alerts": [str(alert) for alert in alerts]}
    steps = [line["step"] for line in lines if "allocated" in line]
    result["monitor"]["ok"] = len(steps) == 8 and all(line["allocated"] > 0 for line in lines if "allocated" in line)

    snapshots = out / "snapshots"
    with rlmem.record(str(snapshots), every=3) as recorder:
        small_loop(torch, 6, lambda step: recorder.step())
    paths = list(recorder.paths)
    result["record"] = {"paths": paths}
    if paths:
        report = rlmem.inspect(paths[-1])
        result["record"]["inspect_peak"] = {key: report.get(key) for key in ("peak_allocated", "peak_reserved")
                                            if key in report} or sorted(report)[:20]
    result["record"]["ok"] = bool(paths) and all(Path(p).is_file() for p in paths)
    result["wheel_package"] = Path(rlmem.__file__).resolve().is_relative_to(Path(sys.prefix).resolve())
    result["ok"] = result["wheel_package"] and result["monitor"]["ok"] and result["record"]["ok"]
    return result


def check_runtime(out: Path) -> dict:
    import torch
    import rlmem
    import rlmem.runtime as rt

    rt.install()
    result: dict = {"library": rlmem.library_path()}
    with rt.region("weights"):
        weights = torch.arange(64 * MiB // 8, dtype=torch.int64, device="cuda") * 2654435761 % 1000003
    checksum = int(weights.sum())
    free_before = torch.cuda.mem_get_info()[0]
    started = time.perf_counter()
    rt.pause("weights", keep="host")
    free_paused = torch.cuda.mem_get_info()[0]
    rt.resume("weights")
    result["pause_resume_seconds"] = time.perf_counter() - started
    result["bytes_returned_while_paused"] = free_paused - free_before
    result["bit_exact_after_resume"] = int(weights.sum()) == checksum
    losses = small_loop(torch, 3, lambda step: None)
    result["training_under_rlmem_losses"] = losses
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        result["oom"] = None
    except BaseException as error:  # noqa: BLE001 - which type crosses from librlmem is the question
        result["oom"] = {"type": f"{type(error).__module__}.{type(error).__qualname__}",
                         "is_torch_oom": isinstance(error, torch.OutOfMemoryError), "message": str(error)[:200]}
    result["works_after_oom"] = float((torch.ones(MiB, device="cuda") * 2).sum()) == 2.0 * MiB
    result["statistics_totals"] = rt.statistics().get("totals")
    result["ok"] = (result["bit_exact_after_resume"] and result["bytes_returned_while_paused"] >= 64 * MiB
                    and bool(result["oom"]) and result["oom"]["is_torch_oom"] and result["works_after_oom"])
    return result


CHECKS = {"monitor": check_monitor, "runtime": check_runtime}


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in CHECKS:
        sys.stderr.write(f"usage: wheel_gpu_check.py {{{','.join(CHECKS)}}} OUT\n")
        return 2
    name, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = CHECKS[name](out)
    except BaseException:  # noqa: BLE001 - the record of what broke is the result
        result = {"ok": False, "error": traceback.format_exc()[-4000:]}
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"{name}: {'ok' if result.get('ok') else 'FAILED'} ({out / (name + '.json')})")
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
