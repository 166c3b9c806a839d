"""A small training loop on the GPU with rlmem.StepMonitor writing its log, keeping a 48 MiB tensor
every step from step 30 (the leak), the batch size varying like response lengths do.
Usage (from the checkout, after make build): python3 tools/watch/leak_loop.py LOG STEPS
tools/watch/check_on_gpu.sh runs it under rlmem watch."""
import sys, time
import torch
sys.path.insert(0, "python")  # the checkout's package, librlmem from build/
import rlmem

mon = rlmem.StepMonitor(sys.argv[1], reset_peak=True)
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(12)]).cuda().bfloat16()
opt = torch.optim.AdamW(model.parameters())
kept = []
for step in range(1, int(sys.argv[2]) + 1):
    n = 4096 + 4096 * (step % 5)
    x = torch.randn(n, 4096, device="cuda", dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step >= 30:
        kept.append(torch.empty(48 << 20, dtype=torch.uint8, device="cuda"))
    for alert in mon.step():
        print("ALERT", alert, flush=True)
    time.sleep(0.3)
mon.close()
print("job done", flush=True)
