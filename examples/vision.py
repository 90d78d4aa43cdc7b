#!/usr/bin/env python3
"""Vision training whose memory varies with the data, for checking that
memdiag tells variation from a leak (neither leaks):

    memdiag run -- python3 examples/vision.py --case detection

  detection  torchvision's Mask R-CNN (ResNet-50 FPN) on images of random sizes
             with 1 to 20 random boxes and masks each
  multiscale a ResNet-50 classifier trained at a random resolution each step
             (160 to 320 pixels), as multi-scale augmentation does
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("detection", "multiscale"))
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


def targets(n: int, h: int, w: int, gen: torch.Generator, dev: torch.device) -> dict:
    xy = torch.rand(n, 2, generator=gen, device=dev) * torch.tensor([w / 2, h / 2], device=dev)
    wh = 16 + torch.rand(n, 2, generator=gen, device=dev) * torch.tensor([w / 2, h / 2], device=dev)
    boxes = torch.cat([xy, xy + wh], 1)
    masks = torch.zeros(n, h, w, dtype=torch.uint8, device=dev)
    for k, (x0, y0, x1, y1) in enumerate(boxes.long().tolist()):
        masks[k, y0:y1, x0:x1] = 1
    return {"boxes": boxes, "labels": torch.randint(1, 91, (n,), generator=gen, device=dev),
            "masks": masks}


def detection(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    import torchvision
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None,
                                                               weights_backbone=None).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(a.steps):
        images, tgts = [], []
        for _ in range(2):
            h, w = (int(v) for v in torch.randint(480, 1025, (2,), generator=gen, device=dev))
            images.append(torch.rand(3, h, w, generator=gen, device=dev))
            tgts.append(targets(int(torch.randint(1, 21, (1,), generator=gen, device=dev)), h, w,
                                gen, dev))
        sum(model(images, tgts).values()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def multiscale(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(a.steps):
        side = 32 * int(torch.randint(5, 11, (1,), generator=gen, device=dev))
        images = torch.randn(64, 3, side, side, generator=gen, device=dev)
        labels = torch.randint(1000, (64,), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("vision.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    gen = torch.Generator(device=dev).manual_seed(0)
    (detection if a.case == "detection" else multiscale)(a, dev, gen)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
