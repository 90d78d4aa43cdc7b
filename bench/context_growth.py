#!/usr/bin/env python3
"""How the memory outside PyTorch's allocator grows in one process, as two
accountings see it: torch.cuda.mem_get_info (device-wide used) and NVML's
per-process used memory (what `memdiag run` records), each minus
memory_reserved. After CUDA init, after `memdiag probe`'s warm-up, and after
training steps of the grid's models (bench/predict_grid.py).

    python3 bench/context_growth.py    (one JSON line per stage)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import predict_grid as g  # noqa: E402
from memdiag import probe  # noqa: E402

MIB = 1 << 20


def nvml_used():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return p.usedGpuMemory
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        return {"no per-process entry; device used": mem.used}
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def report(stage):
    probe._clean(torch)
    free, total = torch.cuda.mem_get_info()
    res = torch.cuda.memory_reserved()
    n = nvml_used()
    print(json.dumps({"stage": stage, "mem_get_info_context_mib": (total - free - res) / MIB,
                      "nvml_process_minus_reserved_mib": (n - res) / MIB if isinstance(n, int)
                      else n, "reserved_mib": res / MIB}), flush=True)


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    report("cuda init")
    probe.warm_up(torch)
    report("probe warm-up")
    for arch in ("llama", "gemma2", "gpt2", "qwen3"):
        for prec in ("fp32", "bf16-autocast", "fp16-autocast", "bf16-pure"):
            g.one(arch, 4, 512, "adamw", prec)
        report(f"after {arch} steps in four precisions")


if __name__ == "__main__":
    main()
