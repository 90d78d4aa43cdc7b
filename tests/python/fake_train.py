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
ap.add_argument("--sigusr1", action="store_true")
ap.add_argument("--skip-step", type=int, default=-1,
                help="no optimizer step in this iteration (as GradScaler on overflow)")
a = ap.parse_args()


class Net(torch.nn.Module):
    def forward(self, x):
        torch.fake_alloc(200 * MIB)  # activations
        return x


class Opt(torch.optim.Optimizer):
    def _step(self):
        pass


torch.fake_alloc(100 * MIB)  # parameters
net, opt = Net(), Opt()
for step in range(a.steps):
    if step == a.oom_at:
        torch.fake_oom(1 << 30)
    net(0)
    torch.Tensor().backward()
    torch.fake_alloc(-200 * MIB + a.leak * MIB + 50 * MIB)  # backward: activations go, grads come
    if step != a.skip_step:
        opt.step()
    torch.fake_alloc(-50 * MIB)  # zero_grad(set_to_none=True) frees the gradients
    opt.zero_grad()
if a.sigusr1:
    os.kill(os.getpid(), signal.SIGUSR1)
