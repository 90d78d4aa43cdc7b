#!/usr/bin/env python3
"""Checks memdiag's diagnosis of PyTorch beside other GPU libraries in one
process (tests/data/interop, captured on an H200 by
`SCRIPT=examples/interop.py sh tests/gpu/patterns.sh` from examples/interop.py).
JAX's allocator taking 75% of the GPU is named in the non_framework summary
with its preallocation settings as the advice; CuPy's memory pool is named by
its module (cupy_backends.cuda.api.runtime, not the bare file name) with its
own advice, and CuPy arrays kept every step are a leak outside PyTorch's
allocator; a neural ODE's solver steps are named in the activations finding,
with odeint_adjoint as the advice.
    python3 tests/cli/check_interop.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"jaxgrab": None, "cupypool": None, "odeint": None})
nf = finding("jaxgrab", "non_framework", "capture")
check("jaxgrab: JAX's allocator named in the summary, its preallocation advised",
      nf["summary"].endswith("107368.0 MiB of it by xla_cuda_plugin.so (JAX/XLA's allocator)") and
      nf["severity"] == "warning" and "XLA_PYTHON_CLIENT_PREALLOCATE=false" in nf["advice"])
nf = finding("cupypool", "non_framework", "capture")
check("cupypool: CuPy's pool named by its module, its advice",
      nf["sites"][0]["site"] == "cupy_backends.cuda.api.runtime (CuPy's memory pool)" and
      nf["advice"].startswith("CuPy holds the most"))
leak = finding("cupyleak", "leak", "capture")
check("cupyleak: a leak outside PyTorch's allocator by CuPy, 64 MiB a step",
      leak["summary"] == "memory outside PyTorch's allocator grows by 64.0 MiB a step and is "
      "never freed: allocated by cupy_backends.cuda.api.runtime")
act = finding("odeint", "activations")
check("odeint: the ODE solver's steps named, odeint_adjoint advised",
      any("torchdiffeq's ODE solver" in e for e in act["evidence"]) and
      act["advice"].startswith("torchdiffeq's odeint_adjoint"))
sys.exit(runs.done())
