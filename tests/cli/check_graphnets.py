#!/usr/bin/env python3
"""Checks memdiag on graph networks trained full-batch on one graph of
100 000 nodes and 3 000 000 edges (tests/data/graphnets, captured on an H200
by `SCRIPT=examples/graphnets.py sh tests/gpu/patterns.sh` from
examples/graphnets.py). torch_geometric's message passing gathers node
features for every edge: GCNConv's peak (13173.6 MiB, in the forward) is two
6054.6 MiB per-edge tensors freed within the layer, which nothing named (only
fragmentation was said); GATConv's (32165.3 MiB, in backward) is its saved
per-edge tensors and their gradients, advised as a transformer's was. Now
the per-edge tensors are named: a sparse adjacency advised for GCN (the
control, GCNConv on a torch.sparse CSR adjacency, peaks at 1370.7 MiB, with
no per-edge finding), sampled neighbourhoods and fewer heads for GAT's
attention over edges. None leaks.
    python3 tests/cli/check_graphnets.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"gat": None, "gcn": None, "gcnsparse": None})
gcn = finding("gcn", "activations")
check("gcn: the forward's per-edge tensors named at the peak, a sparse adjacency advised",
      gcn["severity"] == "warning" and
      gcn["summary"].startswith("the peak falls inside a forward pass's message passing: "
                                "torch_geometric's per-edge tensors are 92% of it (12109.2 of "
                                "13173.6 MiB)") and
      any("gcn_conv.py:271 message" in s["site"] for s in gcn["sites"]) and
      "ToSparseTensor" in gcn["advice"] and "NeighborLoader" in gcn["advice"])
gat = finding("gat", "activations")
check("gat: the saved per-edge tensors and their gradients, attention over edges advised",
      any(e.startswith("12866.1 MiB of them made inside torch_geometric's message passing")
          and "attention coefficients per edge and head" in e for e in gat["evidence"]) and
      any(e.startswith("the peak falls in backward, where 18258.5 MiB of their gradients")
          for e in gat["evidence"]) and
      gat["advice"].startswith("Attention over edges") and "ToSparseTensor" not in gat["advice"])
sparse = runs.findings("gcnsparse", "activations")
check("gcnsparse: no per-edge tensors said, the generic advice",
      len(sparse) == 1 and not any("torch_geometric" in e for e in sparse[0]["evidence"]) and
      "torch_geometric" not in sparse[0]["advice"])
sys.exit(runs.done())
