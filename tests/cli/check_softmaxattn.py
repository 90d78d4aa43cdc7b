#!/usr/bin/env python3
"""Checks memdiag's attention-matrix evidence on recordings with C++ stacks
(tests/data/softmaxattn, captured on an H200 by `memdiag run --stacks all --
python3 examples/softmaxattn.py --case X`): T5 on transformers' sdpa path,
whose relative position bias sends scaled_dot_product_attention to its
math kernel, is named by the C++ frames (its softmax has no Python frame),
with the way to learn why the fused kernels declined; timm's ViT with fused
attention off (attn.softmax, the Tensor method) counts only matrices of the
softmax's sizes, not the projections beside them (16% of its activations at
sequence 197: the generic advice). None leaks.
    python3 tests/cli/check_softmaxattn.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"timmvit": None, "t5all": None})
act = finding("t5all", "activations")
check("t5all: SDPA's math kernel named, its matrices counted, the way to learn why advised",
      any(e.startswith("1980.0 MiB in 72 attention matrices") and "sdpa_attention_forward" in e
          for e in act["evidence"]) and
      act["advice"].startswith("scaled_dot_product_attention ran its math kernel") and
      "enable_math_sdp(False)" in act["advice"])
act = finding("timmvit", "activations")
check("timmvit: no matrices said where they are a small part; the generic advice",
      not any("attention matrices" in e for e in act["evidence"]) and
      act["advice"].startswith("Activation checkpointing of the repeated blocks"))
sys.exit(runs.done())
