#!/usr/bin/env python3
"""State carried from one training step to the next by a context or a
variable that outlives the step, for checking memdiag's diagnosis on it.
Run a case under `memdiag run`:

    memdiag run -- python3 examples/carryover.py --case autocastloop

  autocastloop  one `with torch.autocast(bfloat16)` around the whole training loop
                (forward, backward and optimizer step): autocast's cache keeps the
                bf16 copy of every fp32 weight it cast until the block exits, so
                the copies made in the first forward stay for the whole run, and
                every later forward uses them: the weights the optimizer updates
                are never seen again (the model trains on stale copies)
  autocaststep  autocast around each step's forward and loss only (the control)
  autocastfp16  the whole loop inside one fp16 autocast with a GradScaler (the
                same cache kept: its copies are fp16)
  autocastaccum one autocast around each step's four micro-batches (forward and
                backward) but not the optimizer step: the copies are made once a
                step, shared by its micro-batches and dropped before the step (a
                control: this is what the cache is for)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("autocastloop", "autocastfp16", "autocaststep", "autocastaccum")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, LAYERS, BATCH, SEQ = 32000, 1024, 8, 8, 512


def lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> float:
    loss = F.cross_entropy(model(ids).flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def autocast_loop(a: argparse.Namespace, dev: torch.device) -> None:
    model = lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    batches = [torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
               for _ in range(a.steps)]
    if a.case == "autocastloop":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for step, ids in enumerate(batches):
                print(f"step {step}: loss {train_step(model, opt, ids):.3f}", flush=True)
    elif a.case == "autocastfp16":
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            for step, ids in enumerate(batches):
                loss = F.cross_entropy(model(ids).flatten(0, 1).float(), ids.flatten())
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                print(f"step {step}: loss {loss.item():.3f}", flush=True)
    elif a.case == "autocaststep":
        for step, ids in enumerate(batches):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(ids).flatten(0, 1).float(), ids.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    else:
        for step, ids in enumerate(batches):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                for micro in ids.chunk(4):
                    loss = F.cross_entropy(model(micro).flatten(0, 1).float(), micro.flatten())
                    (loss / 4).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            print(f"step {step}: loss {loss.item():.3f}", flush=True)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("carryover.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    autocast_loop(a, dev)
    torch.cuda.synchronize()
    print(f"carryover.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
