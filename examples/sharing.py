#!/usr/bin/env python3
"""A GPU shared with other processes, for checking memdiag's non_framework
finding (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/sharing.py --case neighbour

  neighbour  another job (not under memdiag) takes 6 GiB of the same GPU at step 3
  workers    DataLoader workers (spawned) that augment each sample on the GPU:
             each worker makes a CUDA context of its own
  sweep      two trainings of a sweep started by torch.multiprocessing.spawn,
             both on cuda:0 (the device was never chosen per process)
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

CASES = ("neighbour", "workers", "sweep")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, SEQ = 16384, 768, 512
NEIGHBOUR = ("import os, time, torch\n"
             "x = torch.empty(6 << 30, dtype=torch.uint8, device='cuda')\n"
             "print('ready', os.getpid(), flush=True)\n"
             "time.sleep(120)\n")


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def another_job() -> int:
    """Someone else's process: started through a shell that exits at once
    (so it is no child of this one), memdiag's environment taken out."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMDIAG") and k != "CUDA_INJECTION64_PATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and "memdiag" not in p)
    sh = subprocess.Popen(["sh", "-c", '"$0" -c "$1" &', sys.executable, NEIGHBOUR],
                          stdout=subprocess.PIPE, env=env, text=True)
    word, pid = sh.stdout.readline().split()
    assert word == "ready"
    sh.wait()
    return int(pid)


def neighbour(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    job = None
    try:
        for step in range(a.steps):
            if step == 3:
                job = another_job()
            train_step(model, opt, torch.randint(VOCAB, (8, SEQ), generator=gen, device=dev))
        torch.cuda.synchronize()
    finally:
        if job:
            os.kill(job, signal.SIGTERM)


class GpuAugmented(torch.utils.data.Dataset):
    """Token sequences 'augmented' on the GPU in the worker, then sent back
    on the CPU: the worker needs a CUDA context for it."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(VOCAB, (SEQ,), generator=g).cuda()
        noise = torch.rand(SEQ, device="cuda") < 0.1
        return torch.where(noise, torch.zeros_like(ids), ids).cpu()


def workers(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(GpuAugmented(), batch_size=8, num_workers=2,
                                         multiprocessing_context="spawn",
                                         persistent_workers=True)
    for step, ids in enumerate(loader):
        if step == a.steps:
            break
        train_step(model, opt, ids.to(dev, non_blocking=True))


def sweep_one(index: int, a: argparse.Namespace) -> None:
    dev = torch.device("cuda", 0)  # the sweep's processes all land here
    torch.manual_seed(index)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=(1e-4, 3e-4)[index])
    gen = torch.Generator(device=dev).manual_seed(index)
    for _ in range(a.steps):
        train_step(model, opt, torch.randint(VOCAB, (8, SEQ), generator=gen, device=dev))
    torch.cuda.synchronize()


def main() -> int:
    if not torch.cuda.is_available():
        print("sharing.py: CUDA is not available", file=sys.stderr)
        return 2
    if ARGS.case == "sweep":
        torch.multiprocessing.spawn(sweep_one, args=(ARGS,), nprocs=2)
    else:
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        torch.manual_seed(0)
        {"neighbour": neighbour, "workers": workers}[ARGS.case](ARGS, dev)
        torch.cuda.synchronize()
    print(f"sharing.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
