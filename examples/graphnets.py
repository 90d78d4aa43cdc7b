#!/usr/bin/env python3
"""Graph neural networks trained full-batch on one large graph, for checking
memdiag's diagnosis where per-edge tensors, not per-node ones, fill the
memory (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/graphnets.py --case gat

  gat     torch_geometric's GATConv, 8 heads, 3 layers, on a random graph of
          100 000 nodes and 3 000 000 edges: each layer's messages and
          attention coefficients are edges x heads x channels and are saved
          for backward (about 6 GiB a layer)
  gcn     the same graph through GCNConv (one weight per edge: the messages
          are edges x channels, no heads)
  gcnsparse  GCNConv with the graph as a sparse adjacency (a torch.sparse CSR
          tensor): gather and sum fused in one sparse matrix product, no
          per-edge tensor (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("gat", "gcn", "gcnsparse")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

NODES, EDGES, FEATURES, CLASSES = 100_000, 3_000_000, 128, 16


class Net(nn.Module):
    def __init__(self, case: str) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv
        if case == "gat":
            self.convs = nn.ModuleList([GATConv(FEATURES, 64, heads=8),
                                        GATConv(512, 64, heads=8),
                                        GATConv(512, CLASSES, heads=1)])
        else:
            self.convs = nn.ModuleList([GCNConv(FEATURES, 512), GCNConv(512, 512),
                                        GCNConv(512, CLASSES)])

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        for conv in self.convs[:-1]:
            x = F.elu(conv(x, edges))
        return self.convs[-1](x, edges)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("graphnets.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(NODES, FEATURES, generator=gen, device=dev)
    edges = torch.randint(NODES, (2, EDGES), generator=gen, device=dev)
    y = torch.randint(CLASSES, (NODES,), generator=gen, device=dev)
    if a.case == "gcnsparse":  # adj_t: row i holds the edges into node i
        from torch_geometric.utils import to_torch_csr_tensor
        edges = to_torch_csr_tensor(edges.flip(0), size=(NODES, NODES))
    model = Net(a.case).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(a.steps):
        loss = F.cross_entropy(model(x, edges), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"graphnets.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
