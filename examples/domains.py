#!/usr/bin/env python3
"""Training outside language modeling, for checking memdiag's diagnosis on
workloads it was not written against (none leaks). Run a case under
`memdiag run`:

    memdiag run -- python3 examples/domains.py --case audio

  gp     an exact Gaussian process (gpytorch) over 20 000 points: its marginal
         likelihood's kernel matrix is 20 000 x 20 000 (1.5 GiB in fp32)
  audio  a wav2vec 2.0 base model (torchaudio, random weights) trained with CTC
         on clips of 4 to 15 s: the feature extractor's first convolutions hold
         the most
  unet   a latent-diffusion denoiser: a frozen VAE encoder under no_grad, then a
         small U-Net whose self-attention at 32 x 32 latents is written as
         softmax(q k^T) (1024 tokens), an EMA copy of the U-Net
"""
from __future__ import annotations

import argparse
import copy
import sys

CASES = ("gp", "audio", "unet")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def gp(a: argparse.Namespace, dev: torch.device) -> None:
    import gpytorch

    class ExactGP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            self.covar = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covar(x))

    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(20000, 8, generator=gen, device=dev)
    y = torch.sin(x.sum(-1) * 3) + 0.1 * torch.randn(20000, generator=gen, device=dev)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(dev)
    model = ExactGP(x, y, likelihood).to(dev)
    model.train()
    likelihood.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def audio(a: argparse.Namespace, dev: torch.device) -> None:
    import torchaudio

    model = torchaudio.models.wav2vec2_base(aux_num_out=32).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    ctc = nn.CTCLoss(zero_infinity=True)
    seconds = (4, 15, 7, 12, 9, 15, 5, 11)
    for step in range(a.steps):
        n = seconds[step % len(seconds)] * 16000
        wave = torch.randn(8, n, generator=gen, device=dev)
        lengths = torch.full((8,), n, device=dev)
        logits, out_lengths = model(wave, lengths)
        targets = torch.randint(1, 32, (8, 40), generator=gen, device=dev)
        loss = ctc(logits.log_softmax(-1).transpose(0, 1), targets, out_lengths,
                   torch.full((8,), 40, device=dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: {n // 16000} s clips, loss {loss.item():.3f}", flush=True)


class Attention(nn.Module):
    """Self-attention over the latent pixels, written out as softmax(q k^T)."""

    def __init__(self, ch: int, heads: int = 8) -> None:
        super().__init__()
        self.heads, self.norm = heads, nn.GroupNorm(32, ch)
        self.qkv, self.out = nn.Conv2d(ch, 3 * ch, 1), nn.Conv2d(ch, ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        att = torch.softmax(q.transpose(-1, -2) @ k / (c // self.heads) ** 0.5, dim=-1)
        y = (v @ att.transpose(-1, -2)).reshape(b, c, h, w)
        return x + self.out(y)


def block(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(32, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(32, cout), nn.SiLU())


class UNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Conv2d(4, 128, 3, padding=1)
        self.down1, self.att1 = block(128, 128), Attention(128)
        self.down2, self.att2 = block(128, 256), Attention(256)
        self.mid = block(256, 256)
        self.up2, self.up1 = block(512, 128), block(256, 128)
        self.outp = nn.Conv2d(128, 4, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h0 = self.inp(x) + t[:, None, None, None]
        h1 = self.att1(self.down1(h0))
        h2 = self.att2(self.down2(F.avg_pool2d(h1, 2)))
        m = self.mid(h2)
        u2 = self.up2(torch.cat([m, h2], 1))
        u1 = self.up1(torch.cat([F.interpolate(u2, scale_factor=2), h1], 1))
        return self.outp(u1)


def unet(a: argparse.Namespace, dev: torch.device) -> None:
    vae = nn.Sequential(block(3, 64), nn.Conv2d(64, 64, 4, 2, 1), block(64, 128),
                        nn.Conv2d(128, 128, 4, 2, 1), block(128, 128), nn.Conv2d(128, 128, 4, 2, 1),
                        nn.Conv2d(128, 4, 1)).to(dev).requires_grad_(False).eval()
    model = UNet().to(dev)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        images = torch.randn(16, 3, 256, 256, generator=gen, device=dev)
        with torch.no_grad():
            latents = vae(images)
        t = torch.rand(16, generator=gen, device=dev)
        noise = torch.randn(latents.shape, generator=gen, device=dev)
        noisy = latents * (1 - t)[:, None, None, None] + noise * t[:, None, None, None]
        loss = F.mse_loss(model(noisy, t), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 0.01)
        print(f"step {step}: loss {loss.item():.4f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("domains.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"gp": gp, "audio": audio, "unet": unet}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"domains.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
