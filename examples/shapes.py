#!/usr/bin/env python3
"""More loop shapes for checking memdiag's diagnosis on code it was not
written against (after patterns.py and loops.py): habits that surprise
people at 2 a.m., and loops whose memory moves without leaking.

The model is a small causal language model written here (token embedding,
six pre-norm nn.TransformerEncoderLayer blocks, a vocabulary head), trained
on synthetic GPU tokens. Run a case under `memdiag run`:

    memdiag run -- python3 examples/shapes.py --case viewleak

Cases that leak GPU memory:
  viewleak      keeps the last position's logits of every step, `logits[:, -1]`,
                a view: it keeps the whole logits tensor alive
  smallleak     keeps every step's predictions, `logits.argmax(-1)` (32 KiB a step)
  gradhookleak  a tensor hook "for inspection" keeps the gradient of every
                step's hidden states (made by backward, kept past it)
  serveleak     inference only: a request loop under no_grad caches every
                response's hidden states on the GPU (no optimizer, no steps)
Cases that must not be called a leak:
  gp            a gradient penalty (autograd.grad with create_graph=True, WGAN-GP's
                double backward)
  gpudata       the whole dataset (640 MiB of tokens) moved to the GPU first, batches
                sliced from it
  graphs        a whole training step captured in a CUDA graph and replayed
  compiled      the model under torch.compile
  epochs        predictions kept on the GPU for the epoch's metrics, released at the
                end of each 3-step epoch
  moe           a top-1 mixture-of-experts block: tokens per expert vary each step
  bucketseq     each batch's sequence length drawn at random (128 to 1024)
  emptycache    torch.cuda.empty_cache() after every step
  serve         inference only: the same request loop, responses moved to the CPU
"""
from __future__ import annotations

import argparse
import sys

CASES = ("viewleak", "smallleak", "gradhookleak", "serveleak", "gp", "gpudata", "graphs",
         "compiled", "epochs", "moe", "bucketseq", "emptycache", "serve")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768


class MoE(nn.Module):
    """Top-1 routing over four expert MLPs: each expert sees the tokens sent to it."""

    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(WIDTH, 4)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                                                   nn.Linear(4 * WIDTH, WIDTH)) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, WIDTH)
        choice = self.router(flat).argmax(-1)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            idx = (choice == i).nonzero().squeeze(1)
            out.index_add_(0, idx, expert(flat[idx]).to(out.dtype))
        return x + out.reshape(x.shape)


class LM(nn.Module):
    def __init__(self, moe: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(6))
        self.moe = MoE() if moe else None
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.moe(x) if self.moe is not None else x

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(ids))


def lm_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def tokens(n: int, seq: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.randint(VOCAB, (n, seq), generator=gen, device=dev)


def train(a: argparse.Namespace, dev: torch.device) -> None:
    model = LM(moe=a.case == "moe").to(dev)
    if a.case == "compiled":
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    data = tokens(163_840, a.seq, gen, dev) if a.case == "gpudata" else None  # 640 MiB
    kept, grads = [], []
    for step in range(a.steps):
        seq = int(torch.randint(128, 1025, (1,), generator=gen, device=dev)) \
            if a.case == "bucketseq" else a.seq
        ids = data[step * a.batch:(step + 1) * a.batch] if data is not None \
            else tokens(a.batch, seq, gen, dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if a.case == "gradhookleak":
                h = model.hidden(ids)
                h.register_hook(lambda g: grads.append(g))  # "to look at later"
                logits = model.head(h)
            else:
                logits = model(ids)
            loss = lm_loss(logits, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.case == "viewleak":  # "only the last position", a view of all of it
            kept.append(logits.detach()[:, -1])
        if a.case in ("smallleak", "epochs"):  # predictions for the epoch's accuracy
            kept.append(logits.detach().argmax(-1))
        if a.case == "epochs" and step % 3 == 2:  # end of an epoch: metrics, then reset
            float(torch.cat(kept).float().mean())
            kept.clear()
        if a.case == "emptycache":
            torch.cuda.empty_cache()
    print(f"shapes.py {a.case}: {a.steps} steps, {len(kept) + len(grads)} tensors kept",
          flush=True)


def gradient_penalty(a: argparse.Namespace, dev: torch.device) -> None:
    """WGAN-GP's critic step: the critic's input gradient norm penalised, so
    backward runs through a graph that autograd.grad built."""
    critic = nn.Sequential(nn.Linear(4096, 2048), nn.LeakyReLU(0.2), nn.Linear(2048, 2048),
                           nn.LeakyReLU(0.2), nn.Linear(2048, 1)).to(dev)
    opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    gen = torch.Generator(device=dev).manual_seed(0)
    n = 32 * a.batch
    for _ in range(a.steps):
        real = torch.randn(n, 4096, generator=gen, device=dev)
        fake = torch.randn(n, 4096, generator=gen, device=dev)
        eps = torch.rand(n, 1, generator=gen, device=dev)
        mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
        g, = torch.autograd.grad(critic(mix).sum(), mix, create_graph=True)
        loss = critic(fake).mean() - critic(real).mean() + 10 * ((g.norm(dim=1) - 1) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def graphed(a: argparse.Namespace, dev: torch.device) -> None:
    """torch's whole-network capture: warm up on a side stream, capture one
    step (capturable Adam), then only copy inputs in and replay."""
    model = LM().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True)
    gen = torch.Generator(device=dev).manual_seed(0)
    static_ids = tokens(a.batch, a.seq, gen, dev)

    def step() -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = lm_loss(model(static_ids), static_ids)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = step()
    for _ in range(a.steps):
        static_ids.copy_(tokens(a.batch, a.seq, gen, dev))
        graph.replay()
    print(f"shapes.py graphs: last loss {float(static_loss):.3f}", flush=True)


def serve(a: argparse.Namespace, dev: torch.device) -> None:
    """A request loop: each request is one forward under no_grad."""
    model = LM().to(dev, dtype=torch.bfloat16).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    cache = {}
    for request in range(2 * a.steps):
        with torch.no_grad():
            h = model.hidden(tokens(a.batch, a.seq, gen, dev))
            reply = model.head(h[:, -1]).argmax(-1)
        cache[request] = h if a.case == "serveleak" else h.cpu()  # "for follow-ups"
        reply.tolist()
    print(f"shapes.py {a.case}: {len(cache)} requests cached", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("shapes.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "gp":
        gradient_penalty(ARGS, dev)
    elif ARGS.case == "graphs":
        graphed(ARGS, dev)
    elif ARGS.case in ("serve", "serveleak"):
        serve(ARGS, dev)
    else:
        train(ARGS, dev)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
