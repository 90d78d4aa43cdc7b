#!/usr/bin/env python3
"""Allocator snapshots of single steady-state steps from the predict grid,
so the activation model can be built from what is actually live at the
peak (memdiag summary shows it by site and category).

    python3 bench/predict_snapshots.py OUTDIR [--all | --options | --newarch | --eager-gc | --neox |
                                             --opt-phi | --moe | --moe2 | --moe-gc]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import predict_grid as g  # noqa: E402

CASES = [("llama", 4, 1024, "adamw", "fp32"), ("llama", 4, 1024, "adamw", "bf16-autocast"),
         ("qwen3", 4, 512, "adamw", "bf16-autocast"), ("gpt2", 4, 512, "sgd", "bf16-pure")]
# one small step of every architecture in every precision (--all)
ALL = [(a, 2, 512, "adamw", p) for a in g.ARCHS for p in g.PRECISIONS]
# one small step of each architecture added later, in every precision (--newarch)
NEWARCH = [(a, 2, 1024, "adamw", p) for a in g.NEWARCH for p in g.PRECISIONS]
# eager attention with checkpointing at 1x2048, where gemma3's first layer's
# backward was over-predicted and olmo2's was not (--eager-gc)
EAGER_GC = [(a, 1, 2048, "sgd", "bf16-autocast", {"attn": "eager", "gc": "default"})
            for a in ("gemma3-gqa", "olmo2-gqa")]
# one small step of gpt_neox in every precision (--neox)
NEOX = [("gpt_neox", 2, 1024, "adamw", p) for p in g.PRECISIONS]
# one small step of opt and phi in every precision (--opt-phi)
OPTPHI = [(a, 2, 1024, "adamw", p) for a in g.OPTPHI for p in g.PRECISIONS]
# one small step of mixtral in every precision (--moe)
MOE = [("mixtral", 2, 1024, "adamw", p) for p in g.PRECISIONS]
# one small step of qwen3_moe and qwen2_moe in every precision (--moe2)
MOE2 = [(a, 2, 1024, "adamw", p) for a in g.MOE2 for p in g.PRECISIONS]
# checkpointing on qwen2-moe-wide in fp32 with SGD, 4.6 % under predict (--moe-gc)
MOE_GC = [("qwen2-moe-wide", 4, 512, "sgd", "fp32", {"gc": "default"})]
# the training options on llama (--options)
OPTIONS = [("llama", 2, 512, "adamw", p, o) for o in g.OPTION_SETS
           for p in ("bf16-autocast", "fp32")]


def main():
    out = sys.argv[1]
    orig = torch.cuda.reset_peak_memory_stats

    cases = ALL if "--all" in sys.argv else OPTIONS if "--options" in sys.argv else CASES
    table = g.ARCHS
    if "--newarch" in sys.argv:
        cases, table = NEWARCH, g.NEWARCH
    if "--neox" in sys.argv:
        cases, table = NEOX, g.NEOX
    if "--opt-phi" in sys.argv:
        cases, table = OPTPHI, g.OPTPHI
    if "--moe" in sys.argv:
        cases, table = MOE, g.MOE
    if "--moe2" in sys.argv:
        cases, table = MOE2, g.MOE2
    if "--moe-gc" in sys.argv:
        cases, table = MOE_GC, {**g.MOE_FINAL, **g.MOE2_FINAL}
    if "--eager-gc" in sys.argv:
        cases, table = EAGER_GC, g.NEWARCH_FINAL
    for arch, b, s, opt, prec, *options in cases:
        options = options[0] if options else {}
        tag = "-".join(f"{k}{v if not isinstance(v, list) else ''}" for k, v in options.items())
        # start recording exactly where the grid resets the peak (step 2)
        def reset(*a, **k):
            torch.cuda.memory._record_memory_history(max_entries=500000, stacks="python")
            return orig(*a, **k)
        torch.cuda.reset_peak_memory_stats = reset
        row = g.one(arch, b, s, opt, prec, table, options)
        torch.cuda.memory._dump_snapshot(f"{out}/{arch}-{b}x{s}-{opt}-{prec}{'-' + tag if tag else ''}.pickle")
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.reset_peak_memory_stats = orig
        print(arch, b, s, opt, prec, row["peak_allocated"], flush=True)


if __name__ == "__main__":
    main()
