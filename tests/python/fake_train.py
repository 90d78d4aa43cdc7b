"""A training loop over the fake torch: parameters, then per step a
forward (activations), backward (gradients), step and zero_grad, with
--leak MiB kept every step. Run by tests/python/test_run.sh under
`memdiag run`."""
import argparse
import os
import signal

import torch

MIB = 1 << 20
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--leak", type=int, default=0)
ap.add_argument("--oom-at", type=int, default=-1)
ap.add_argument("--oom-retry", type=int, default=-1,
                help="at this step a larger batch runs out of memory in backward; the error "
                     "is caught, the gradients cleared, and the step tried again")
ap.add_argument("--wrapped", action="store_true",
                help="the optimizer steps another inside its own step "
                     "(ZeroRedundancyOptimizer over AdamW)")
ap.add_argument("--sigusr1", action="store_true")
ap.add_argument("--skip-step", type=int, default=-1,
                help="GradScaler skips the optimizer step in this iteration (overflow)")
ap.add_argument("--grad", choices=("only", "then-backward"),
                help="torch.autograd.grad (100 MiB of its own) after the forward: alone "
                     "(DP-SGD's per-sample gradients), or before the backward (a gradient penalty)")
ap.add_argument("--sam", action="store_true",
                help="sharpness-aware minimization: two forward/backward passes a step, "
                     "zero_grad between them")
ap.add_argument("--attack", choices=("grad", "backward"),
                help="adversarial training's order: an attack's forward and autograd.grad "
                     "(or backward), then zero_grad, forward, backward and step (no zero_grad "
                     "after it)")
ap.add_argument("--closure", action="store_true",
                help="PyTorch Lightning's order: opt.step(closure), the closure runs "
                     "forward, zero_grad, backward")
ap.add_argument("--replica", type=int, default=0,
                help="MiB a DataParallel replica's forward keeps on cuda:1 until its backward")
ap.add_argument("--device", type=int, default=0,
                help="allocate on this GPU by name, never calling set_device")
ap.add_argument("--gan", action="store_true",
                help="two optimizers in turn (a GAN's discriminator, then generator); the "
                     "first step's batch is held until the second's end, --leak MiB kept "
                     "each iteration")
ap.add_argument("--raw", action="store_true",
                help="a model of raw tensors: the forward calls no module")
a = ap.parse_args()
torch._state["alloc_device"] = a.device


class Net(torch.nn.Module):
    def forward(self, x):
        torch.fake_alloc(200 * MIB)  # activations
        return x


class Opt(torch.optim.Optimizer):
    def _step(self):
        pass


class Wrapper(torch.optim.Optimizer):
    def __init__(self):
        self.inner = Opt()

    def _step(self):
        self.inner.step()


torch.fake_alloc(100 * MIB)  # parameters
net, opt = Net(), (Wrapper() if a.wrapped else Opt())
if a.closure:
    grads = [0]

    def closure():
        net(0)                                  # forward: +200 MiB of activations
        torch.fake_alloc(-grads[0])             # zero_grad frees last step's gradients
        opt.zero_grad()
        torch.Tensor().backward()               # activations go, gradients come
        grads[0] = 50 * MIB

    torch._state["on_backward"] = lambda: torch.fake_alloc(-200 * MIB + 50 * MIB)

    for step in range(a.steps):
        opt.step(closure)
    raise SystemExit(0)
if a.attack:
    for step in range(a.steps):
        net(0)                                  # the attack's forward: +200 MiB
        torch.fake_alloc(100 * MIB)             # and what only the attack makes
        if a.attack == "grad":                  # the input's gradient; its graph goes
            torch.autograd.grad()
        else:
            torch.Tensor().backward()
        torch.fake_alloc(-300 * MIB)
        if step:
            torch.fake_alloc(-50 * MIB)         # zero_grad frees last step's gradients
        opt.zero_grad()
        net(0)
        torch.Tensor().backward()
        torch.fake_alloc(-200 * MIB + 50 * MIB)
        opt.step()
    raise SystemExit(0)
if a.gan:  # per step the memory alternates (+10, then -10 + leak): only iterations grow
    g_opt = Opt()
    for it in range(a.steps):
        for k, o in enumerate((opt, g_opt)):
            net(0)
            torch.Tensor().backward()
            torch.fake_alloc(-200 * MIB + 50 * MIB)
            torch.fake_alloc((10 if k == 0 else a.leak - 10) * MIB)
            o.step()
            torch.fake_alloc(-50 * MIB)
            o.zero_grad()
    raise SystemExit(0)
for step in range(a.steps):
    if step == a.oom_at:  # a larger batch's forward, then a request that fails
        torch.fake_alloc(400 * MIB)
        torch.fake_oom(1 << 30)
    if step == a.oom_retry:  # accelerate's find_executable_batch_size
        try:
            net(0)
            torch.fake_alloc(400 * MIB)
            torch.Tensor().backward()
            torch.fake_oom(1 << 30)
        except torch.cuda.OutOfMemoryError:
            torch.fake_alloc(-600 * MIB)
            opt.zero_grad()
    if a.raw:
        torch.fake_alloc(200 * MIB)  # the same activations, made by no module
    else:
        net(0)
    torch.fake_alloc(a.replica * MIB, device=1)
    if a.grad:
        torch.autograd.grad()
        torch.fake_alloc(100 * MIB)
    if a.grad != "only":
        torch.Tensor().backward()
    if a.grad:
        torch.fake_alloc(-100 * MIB)
    torch.fake_alloc(-200 * MIB + a.leak * MIB + 50 * MIB)  # backward: activations go, grads come
    torch.fake_alloc(-a.replica * MIB, device=1)
    if a.sam:  # the weights moved (30 MiB kept), the first pass's gradients
        torch.fake_alloc(30 * MIB)  # cleared, the second pass's step
        torch.fake_alloc(-50 * MIB)
        opt.zero_grad()
        net(0)
        torch.Tensor().backward()
        torch.fake_alloc(-200 * MIB + 50 * MIB - 30 * MIB)
    if a.skip_step >= 0:
        torch.amp.GradScaler(skip=step == a.skip_step).step(opt)
    else:
        opt.step()
    torch.fake_alloc(-50 * MIB)  # zero_grad(set_to_none=True) frees the gradients
    opt.zero_grad()
if a.sigusr1:
    os.kill(os.getpid(), signal.SIGUSR1)
