#!/usr/bin/env python3
"""Checks memdiag on attention that keeps its seq x seq matrices for
backward (tests/data/attention, captured on an H200 by
`SCRIPT=examples/attention.py sh tests/gpu/patterns.sh` from
examples/attention.py): transformers' eager attention and nanoGPT's
written-out attention are named as the activations' cause with the fix
each needs; the same Llama on SDPA is not told to use SDPA. nanoGPT's
causal-mask buffers are not in AdamW's multiple (it read 1.87 x). None leaks.
    python3 tests/cli/check_attention.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"hfeager": None, "hfsdpa": None, "nanogpt": None})
act = finding("hfeager", "activations")
check("hfeager: eager attention's matrices named, attn_implementation advised",
      any(e.startswith("3456.0 MiB in 12 attention matrices") and "eager_attention_forward" in e
          for e in act["evidence"]) and
      act["advice"].startswith('Load the model with attn_implementation="sdpa"'))
act = finding("nanogpt", "activations")
check("nanogpt: the written-out attention's softmax outputs named, SDPA advised in its place",
      any(e.startswith("1152.0 MiB in 6 attention matrices") and "attention.py:72 attend" in e
          for e in act["evidence"]) and
      act["advice"].startswith("Compute the attention with "
                               "torch.nn.functional.scaled_dot_product_attention"))
act = finding("hfsdpa", "activations")
check("hfsdpa: on SDPA already: no attention matrices, no SDPA advice",
      not any("attention matrices" in e for e in act["evidence"]) and "SDPA" not in act["advice"])
opt = finding("nanogpt", "optimizer_state")
check("nanogpt: AdamW's state against the weights, the causal masks left out",
      "2.00 x the trained parameter bytes" in opt["summary"] and
      any("373.7 MiB, of which 349.7 MiB get gradients" in e for e in opt["evidence"]))
sys.exit(runs.done())
