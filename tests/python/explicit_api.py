"""The explicit API and the callbacks' window over the stand-in torch:
memdiag.start/stop, memdiag.dump, and the Lightning/HF callbacks' shared
window logic (skip, interval, templates, overwrite guard)."""
import os
import sys

import torch

import memdiag
from memdiag.callbacks import _Window

out = sys.argv[1]
MIB = 1 << 20


class Net(torch.nn.Module):
    def forward(self, x):
        torch.fake_alloc(100 * MIB)
        return x


class Opt(torch.optim.Optimizer):
    pass


rec = memdiag.start(os.path.join(out, "api"))
net, opt = Net(), Opt()
for step in range(4):
    net(0)
    torch.Tensor().backward()
    torch.fake_alloc(-100 * MIB)
    opt.step()
    opt.zero_grad()
assert memdiag.dump("here").endswith("rank0-here.pickle")
memdiag.stop()
assert os.path.getsize(os.path.join(out, "api", "rank0.mdcap")) > 100
assert os.path.isfile(os.path.join(out, "api", "rank0.pickle"))

w = _Window(skip_batches=1, interval=2, folder=os.path.join(out, "cb"),
            filename="rank{rank}.step{step}")
for b in range(5):
    w.batch_start()
    torch.fake_alloc(MIB)
    w.batch_end()
# batches 1 and 2 recorded, dumped when batch 3 begins counting, with the
# snapshot's HTML report beside it
assert sorted(os.listdir(os.path.join(out, "cb"))) == ["rank0.step3-window.html",
                                                      "rank0.step3-window.pickle"], \
    os.listdir(os.path.join(out, "cb"))
assert "<canvas" not in open(os.path.join(out, "cb", "rank0.step3-window.html")).read()  # drawn by script
assert "mdTimeline(" in open(os.path.join(out, "cb", "rank0.step3-window.html")).read()
try:
    _Window(folder=os.path.join(out, "cb"), filename="rank{rank}.step{step}")._recorder()
    raise SystemExit("overwrite guard did not fire")
except FileExistsError:
    pass
try:
    _Window(filename="rank{nope}")
    raise SystemExit("bad template accepted")
except ValueError:
    pass
print("explicit api: ok")
