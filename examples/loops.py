#!/usr/bin/env python3
"""Training loops of other shapes than patterns.py's, for checking memdiag's
diagnosis on code it was not written against.

Most cases train transformers' GPT-2 (built from a config, no download) as a
causal LM on synthetic GPU tokens; each --case is one way of writing the loop.
Run it under `memdiag run` (it records nothing itself):

    memdiag run -- python3 examples/loops.py --case gan

Cases that leak GPU memory every step:
  ckptleak    a "best model" copy of the state dict is cloned on the GPU every
              step and appended to a list
  evalleak    a validation forward after each step, outside torch.no_grad, its
              logits kept in a list: each one keeps its whole graph
  ganleak     the GAN below, keeping each iteration's generated batch (detached)
  wganleak    the same with WGAN's schedule: five critic steps a generator step
  zgleak      zero_grad first in the loop (the tutorials' order), each step's logits
              kept detached
  accelleak   accelerate's Accelerator, 4 micro-batches a step accumulated, bf16;
              every micro-batch's logits kept detached
  evalevery   a validation under no_grad every other step, its logits kept
Cases that must not be called a leak:
  totalloss   the running loss summed as a tensor (`total = total + loss`) keeps
              every step's graph reachable, but backward freed what it saved
  gpt2        the plain loop: AdamW, bf16 autocast
  gpt2ckpt    the same with transformers' gradient checkpointing
  peftlora    peft's LoRA (rank 64) on GPT-2's projections, the base frozen
  distill     a 3-layer student learning from the frozen 6-layer model (KL on logits)
  gnn         torch_geometric's GCN on random graphs of 20 000 to 200 000 nodes
  gan         two MLPs, a generator and a discriminator, each with its own Adam:
              two optimizer steps per iteration
  lora        the model frozen, rank-64 adapters on every attention and MLP
              projection trained with AdamW (optimizer state for the adapters only)
  growseq     the sequence length grows every step (128, 256, ... 1024)
  retain      backward(retain_graph=True): each step's graph lives until the
              next step's forward replaces the variables that hold it
  sgd         plain SGD (no momentum): no optimizer state at all
  adafactor   torch.optim.Adafactor: factored second moments, far below 2 x
"""
from __future__ import annotations

import argparse
import sys

CASES = ("ckptleak", "evalleak", "ganleak", "wganleak", "zgleak", "accelleak", "evalevery",
         "totalloss", "gpt2", "gpt2ckpt", "peftlora", "distill", "gnn", "gan", "lora", "growseq",
         "retain", "sgd", "adafactor")


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

VOCAB = 16384


def gpt2(dev: torch.device, layers: int = 6) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=768, n_layer=layers, n_head=12,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = "sdpa"
    return GPT2LMHeadModel(cfg).to(dev)


class LoRA(nn.Module):
    """y = base(x) + B(A(x)) * scale, base frozen (a hand-written peft-style adapter)."""

    def __init__(self, base: nn.Module, n_in: int, n_out: int, rank: int = 64) -> None:
        super().__init__()
        self.base = base
        self.a = nn.Linear(n_in, rank, bias=False)
        self.b = nn.Linear(rank, n_out, bias=False)
        nn.init.zeros_(self.b.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.b(self.a(x)) * 2.0


def add_lora(model: nn.Module) -> None:
    """GPT-2's projections are Conv1D (weight [in, out]); wrap each one."""
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.transformer.h:
        for owner, name in ((block.attn, "c_attn"), (block.attn, "c_proj"),
                            (block.mlp, "c_fc"), (block.mlp, "c_proj")):
            base = getattr(owner, name)
            n_in, n_out = base.weight.shape
            setattr(owner, name, LoRA(base, n_in, n_out).to(base.weight.device))


def batch_of(n: int, seq: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.randint(VOCAB, (n, seq), generator=gen, device=dev)


def gan(a: argparse.Namespace, dev: torch.device) -> None:
    def mlp(*dims: int) -> nn.Module:
        layers = []
        for i in range(len(dims) - 1):
            layers += [nn.Linear(dims[i], dims[i + 1]), nn.LeakyReLU(0.2)]
        return nn.Sequential(*layers[:-1]).to(dev)

    g, d = mlp(128, 2048, 2048, 4096), mlp(4096, 2048, 2048, 1)
    g_opt = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    gen = torch.Generator(device=dev).manual_seed(0)
    n = 32 * a.batch
    ones, zeros = torch.ones(n, 1, device=dev), torch.zeros(n, 1, device=dev)
    grid, critic = [], 5 if a.case == "wganleak" else 1
    for _ in range(a.steps):
        for _ in range(critic):
            real = torch.randn(n, 4096, generator=gen, device=dev)
            fake = g(torch.randn(n, 128, generator=gen, device=dev))
            d_loss = bce(d(real), ones) + bce(d(fake.detach()), zeros)
            d_opt.zero_grad(set_to_none=True)
            d_loss.backward()
            d_opt.step()
        g_loss = bce(d(fake), ones)
        g_opt.zero_grad(set_to_none=True)
        g_loss.backward()
        g_opt.step()
        if a.case in ("ganleak", "wganleak"):  # "a sample grid for later", on the GPU
            grid.append(fake.detach())


def lm_loop(a: argparse.Namespace, dev: torch.device) -> None:
    model = gpt2(dev)
    if a.case == "peftlora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=64, lora_alpha=128, lora_dropout=0.0,
                                                 fan_in_fan_out=True,
                                                 target_modules=["c_attn", "c_proj", "c_fc"]))
    if a.case == "gpt2ckpt":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if a.case == "lora":
        add_lora(model)
    params = [p for p in model.parameters() if p.requires_grad]
    if a.case == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3)
    elif a.case == "adafactor":
        opt = torch.optim.Adafactor(params, lr=1e-3)
    else:
        opt = torch.optim.AdamW(params, lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    total, kept = 0.0, []
    for step in range(a.steps):
        seq = 128 * (step + 1) if a.case == "growseq" else a.seq
        ids = batch_of(a.batch, seq, gen, dev)
        if a.case == "zgleak":
            opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        loss = out.loss
        loss.backward(retain_graph=a.case == "retain")
        if a.case == "totalloss":  # meant as a float for logging; keeps the graph
            total = total + loss
        if a.case == "zgleak":  # "for the epoch's accuracy", on the GPU
            kept.append(out.logits.detach())
        opt.step()
        if a.case != "zgleak":
            opt.zero_grad(set_to_none=True)
        if a.case == "ckptleak":  # "keep the best weights", on the GPU, every step
            kept.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        if a.case == "evalevery" and step % 2:  # every other step, its logits kept
            with torch.no_grad():
                kept.append(model(input_ids=batch_of(2, a.seq, gen, dev)).logits)
        if a.case == "evalleak":  # validation without torch.no_grad, outputs kept
            model.eval()
            kept.append(model(input_ids=batch_of(2, a.seq, gen, dev)).logits)
            model.train()
    print(f"loops.py {a.case}: {a.steps} steps, running loss {float(total):.3f}, "
          f"{len(kept)} copies kept", flush=True)


def gnn(a: argparse.Namespace, dev: torch.device) -> None:
    """A two-layer GCN on a new random graph every step (sizes vary 10x)."""
    from torch_geometric.nn import GCNConv

    class GCN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.c2 = GCNConv(128, 256), GCNConv(256, 16)

        def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
            return self.c2(self.c1(x, edges).relu(), edges)

    model = GCN().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        n = int(torch.randint(20_000, 200_000, (1,), generator=gen, device=dev))
        x = torch.randn(n, 128, generator=gen, device=dev)
        edges = torch.randint(n, (2, 10 * n), generator=gen, device=dev)
        y = torch.randint(16, (n,), generator=gen, device=dev)
        nn.functional.cross_entropy(model(x, edges), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def distill(a: argparse.Namespace, dev: torch.device) -> None:
    """Knowledge distillation: the student matches the frozen teacher's
    token distributions (KL divergence), bf16 autocast."""
    teacher, student = gpt2(dev).eval().requires_grad_(False), gpt2(dev, layers=3)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = batch_of(a.batch // 2, a.seq, gen, dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                target = teacher(input_ids=ids).logits.float().log_softmax(-1)
            out = student(input_ids=ids).logits.float().log_softmax(-1)
            loss = nn.functional.kl_div(out, target, log_target=True, reduction="batchmean")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def accelerated(a: argparse.Namespace, dev: torch.device) -> None:
    """accelerate's loop: accumulate() over 4 micro-batches, bf16."""
    from accelerate import Accelerator
    acc = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")
    model = gpt2(dev)
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-4))
    gen = torch.Generator(device=dev).manual_seed(0)
    kept = []
    for _ in range(4 * a.steps):
        ids = batch_of(a.batch // 2, a.seq, gen, dev)
        with acc.accumulate(model):
            out = model(input_ids=ids, labels=ids)
            acc.backward(out.loss)
            opt.step()
            opt.zero_grad()
        kept.append(out.logits.detach())  # "for the epoch's metrics", on the GPU


def main() -> int:
    if not torch.cuda.is_available():
        print("loops.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case in ("gan", "ganleak", "wganleak"):
        gan(ARGS, dev)
    elif ARGS.case == "gnn":
        gnn(ARGS, dev)
    elif ARGS.case == "accelleak":
        accelerated(ARGS, dev)
    elif ARGS.case == "distill":
        distill(ARGS, dev)
    else:
        lm_loop(ARGS, dev)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
