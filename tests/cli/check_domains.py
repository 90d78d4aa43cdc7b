#!/usr/bin/env python3
"""Checks memdiag on training outside language modeling (tests/data/domains,
captured on an H200 by `SCRIPT=examples/domains.py sh tests/gpu/patterns.sh`
from examples/domains.py). An exact GP's N x N kernel matrices are named as
such, with KeOps and inducing points as the advice (not checkpointing); a
wav2vec 2.0 model on clips of 4 to 15 s says the forward pass follows the
inputs' size, capping or budgeting batches advised; a U-Net whose attention
is written as softmax(q k^T) peaks in backward on the gradients of its
1024 x 1024 matrices: the line that makes them is named, with SDPA advised
(the saved activations alone are 21 % of that peak: nothing was said).
None leaks.
    python3 tests/cli/check_domains.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"gp": None, "audio": None, "unet": None})
gp = finding("gp", "activations")
check("gp: the kernel matrices named, KeOps and inducing points advised",
      any(e.startswith("4582.0 MiB of them made inside gpytorch's kernels and operators, the "
                       "largest 1526.0 MiB: an exact GP keeps N x N kernel matrices")
          for e in gp["evidence"]) and
      gp["advice"].startswith("An exact GP's memory is quadratic in its training points") and
      "gpytorch.kernels.keops" in gp["advice"] and "checkpointing" not in gp["advice"])
audio = finding("audio", "activations")
check("audio: the forward follows the clips' length, capping or budgeting advised",
      any(e.startswith("the forward pass varies with the inputs: 3277.0 MiB in step 2, 7752.8 MiB "
                       "in step 5 (2.4 x; their inputs 3.4 and 7.3 MiB)") for e in audio["evidence"])
      and "capping their size (length, resolution)" in audio["advice"])
check("audio: the cache that many sizes leave is fragmentation",
      finding("audio", "fragmentation")["severity"] == "info")
unet = finding("unet", "activations")
check("unet: a peak in backward on the attention matrices' gradients, their line named, SDPA "
      "advised",
      unet["severity"] == "warning" and
      unet["summary"].startswith("the peak falls in backward: the gradients it is computing and "
                                 "the activations saved for it are 94% of the peak (2064.0 MiB") and
      any(e.startswith("the step's forward made 3 tensors of that size at "
                       "/work/main/examples/domains.py:102 forward") for e in unet["evidence"]) and
      "scaled_dot_product_attention" in unet["advice"])
sys.exit(runs.done())
