#!/usr/bin/env python3
"""Training methods from papers, whose memory is not a plain training step's,
for checking memdiag's diagnosis on them (only bestleak leaks). Run a case
under `memdiag run`:

    memdiag run -- python3 examples/research.py --case sam

  sam         sharpness-aware minimization: two forward/backward passes a step,
              the weights moved to a nearby point and back between them
  maml        MAML: 3 inner SGD steps per task with create_graph=True, 8 tasks
              a step; every task's fast weights and graphs live to the backward
  dpsgd       DP-SGD: per-sample gradients (torch.func vmap of grad), clipped and
              noised, assigned to .grad by hand
  bestkeep    the best model's state_dict kept on the GPU (copy.deepcopy) and
              replaced when the loss improves
  bestleak    every step's state_dict copied and appended to a list on the GPU
  moco        MoCo: a momentum key encoder and a 65536-entry queue of keys
  scaler      fp16 with a GradScaler whose first scale overflows: the first steps'
              optimizer steps are skipped
  fraction    the process may use 4 GiB (set_per_process_memory_fraction); the batch
              grows to 48 at step 3 and runs out of memory
  twostreams  each step on one of two side streams (the allocator caches per stream)
  hvp         every third step the Hessian's top eigenvalue by 4 Hessian-vector
              products (double backward)
"""
from __future__ import annotations

import argparse
import copy
import sys

CASES = ("sam", "maml", "dpsgd", "bestkeep", "bestleak", "moco", "scaler", "fraction",
         "twostreams", "hvp")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.func import functional_call, grad, vmap  # noqa: E402

VOCAB, WIDTH = 16384, 768


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def mlp(dev: torch.device, sizes: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (n, m) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(n, m)] + ([nn.GELU()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers).to(dev)


def tokens(n: int, seq: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.randint(VOCAB, (n, seq), generator=gen, device=dev)


def lm_loss(model: nn.Module, ids: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    with torch.autocast("cuda", dtype=dtype):
        logits = model(ids)
        return nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> float:
    loss = lm_loss(model, ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


def sam(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = tokens(a.batch, a.seq, gen, dev)
        lm_loss(model, ids).backward()
        params = [p for p in model.parameters() if p.grad is not None]
        with torch.no_grad():  # climb to the worst point within rho = 0.05
            norm = torch.stack([p.grad.norm() for p in params]).norm()
            eps = [p.grad * (0.05 / (norm + 1e-12)) for p in params]
            torch._foreach_add_(params, eps)
        opt.zero_grad(set_to_none=True)
        lm_loss(model, ids).backward()  # the gradient there
        with torch.no_grad():
            torch._foreach_sub_(params, eps)
        del eps
        opt.step()
        opt.zero_grad(set_to_none=True)


def maml(a: argparse.Namespace, dev: torch.device) -> None:
    net = mlp(dev, (64, 2048, 2048, 2048, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    mse = nn.functional.mse_loss
    for _ in range(a.steps):
        outer = torch.zeros((), device=dev)
        for _task in range(8):
            x = torch.randn(1024, 64, generator=gen, device=dev)
            y = (x @ torch.randn(64, 1, generator=gen, device=dev)).sin()
            fast = dict(net.named_parameters())
            for _inner in range(3):
                loss = mse(functional_call(net, fast, (x[:512],)), y[:512])
                grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
                fast = {k: v - 0.01 * g for (k, v), g in zip(fast.items(), grads)}
            outer = outer + mse(functional_call(net, fast, (x[512:],)), y[512:])
        (outer / 8).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def dpsgd(a: argparse.Namespace, dev: torch.device) -> None:
    net = mlp(dev, (784, 2048, 2048, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    gen = torch.Generator(device=dev).manual_seed(0)
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss_one(p: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(net, p, (x[None],)), y[None])

    per_sample = vmap(grad(loss_one), in_dims=(None, 0, 0))
    batch, clip, sigma = 128, 1.0, 1.0
    for _ in range(a.steps):
        x = torch.randn(batch, 784, generator=gen, device=dev)
        y = torch.randint(10, (batch,), generator=gen, device=dev)
        g = per_sample(params, x, y)  # batch x the parameters
        norms = torch.stack([v.flatten(1).norm(dim=1) for v in g.values()]).norm(dim=0)
        scale = (clip / (norms + 1e-6)).clamp(max=1.0)
        for k, p in net.named_parameters():
            s = scale.view(-1, *[1] * p.dim())
            noise = torch.randn(p.shape, generator=gen, device=dev) * sigma * clip
            p.grad = ((g[k] * s).sum(0) + noise) / batch
        del g
        opt.step()
        opt.zero_grad(set_to_none=True)


def best(a: argparse.Namespace, dev: torch.device, keep_every: bool) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    best_loss, best_state, history = float("inf"), None, []
    for _ in range(a.steps):
        loss = train_step(model, opt, tokens(a.batch, a.seq, gen, dev))
        if keep_every:
            history.append(copy.deepcopy(model.state_dict()))
        elif loss < best_loss:
            best_loss, best_state = loss, copy.deepcopy(model.state_dict())
    print(f"research.py: best loss {best_loss:.3f}, {len(history)} copies kept,"
          f" best kept: {best_state is not None}", flush=True)


def moco(a: argparse.Namespace, dev: torch.device) -> None:
    enc_q = mlp(dev, (1024, 4096, 4096, 128))
    enc_k = copy.deepcopy(enc_q).requires_grad_(False)
    opt = torch.optim.SGD(enc_q.parameters(), lr=0.03, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(0)
    norm = nn.functional.normalize
    queue, ptr, n = norm(torch.randn(128, 65536, generator=gen, device=dev), dim=0), 0, 256
    for _ in range(a.steps):
        x = torch.randn(n, 1024, generator=gen, device=dev)
        q = norm(enc_q(x + 0.1 * torch.randn(x.shape, generator=gen, device=dev)), dim=1)
        with torch.no_grad():
            for pq, pk in zip(enc_q.parameters(), enc_k.parameters()):
                pk.mul_(0.999).add_(pq.detach(), alpha=0.001)
            k = norm(enc_k(x + 0.1 * torch.randn(x.shape, generator=gen, device=dev)), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue], dim=1) / 0.07
        loss = nn.functional.cross_entropy(logits, torch.zeros(n, dtype=torch.long, device=dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            queue[:, ptr:ptr + n] = k.T
        ptr = (ptr + n) % queue.shape[1]


def scaler(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scale = torch.amp.GradScaler("cuda", init_scale=2.0**28, backoff_factor=0.25)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps + 3):
        scale.scale(lm_loss(model, tokens(a.batch, a.seq, gen, dev), torch.float16)).backward()
        scale.step(opt)  # skipped while the scaled gradients overflow
        scale.update()
        opt.zero_grad(set_to_none=True)
        print(f"research.py scaler: step {step}, scale {scale.get_scale():.0f}", flush=True)


def fraction(a: argparse.Namespace, dev: torch.device) -> None:
    torch.cuda.set_per_process_memory_fraction(4 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        train_step(model, opt, tokens(a.batch if step < 3 else 48, a.seq, gen, dev))


def two_streams(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    streams = [torch.cuda.Stream(dev) for _ in range(2)]
    for step in range(a.steps):
        s = streams[step % 2]
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            train_step(model, opt, tokens(a.batch, a.seq, gen, dev))
        torch.cuda.current_stream().wait_stream(s)


def hvp(a: argparse.Namespace, dev: torch.device) -> None:
    net = mlp(dev, (1024,) + (4096,) * 6 + (1,))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    params = list(net.parameters())
    for step in range(a.steps):
        x = torch.randn(2048, 1024, generator=gen, device=dev)
        y = x[:, :1].sin()
        loss = nn.functional.mse_loss(net(x), y)
        if step % 3 == 2:  # sharpness: power iteration on the Hessian
            grads = torch.autograd.grad(loss, params, create_graph=True)
            v = [torch.randn(p.shape, generator=gen, device=dev) for p in params]
            for _ in range(4):
                hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
                n = torch.stack([h.norm() for h in hv]).norm()
                v = [h / n for h in hv]
            print(f"research.py hvp: step {step}, top eigenvalue ~{float(n):.3g}", flush=True)
            del grads, hv
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("research.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"sam": sam, "maml": maml, "dpsgd": dpsgd, "bestkeep": lambda a, d: best(a, d, False),
     "bestleak": lambda a, d: best(a, d, True), "moco": moco, "scaler": scaler,
     "fraction": fraction, "twostreams": two_streams, "hvp": hvp}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"research.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
