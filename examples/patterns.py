#!/usr/bin/env python3
"""Training-loop patterns met in the wild, for checking memdiag's diagnosis
on code it was not written against.

The model is torch's own nn.TransformerEncoder (not workloads.py's model),
trained to tag each token (1024 classes) on synthetic GPU data; each
--case is one habit of a training loop. Run it under `memdiag run` (it records nothing itself):

    memdiag run -- python3 examples/patterns.py --case hookleak

Cases that leak GPU memory every step:
  hookleak    a forward hook keeps every block's output (with its graph)
  detachleak  every step's logits are kept for metrics, detached (no graph)
  cacheleak   a dict caches each step's embeddings on the GPU, keyed by step
Cases that must not be called a leak:
  accum       AdamW, 4 micro-batches accumulated per optimizer step
  evalloop    each step is followed by an evaluation under torch.no_grad
  keepgrads   zero_grad(set_to_none=False): gradients stay allocated, zeroed
  ema         an exponential moving average copy of the model, made at step 0
  warmup      the batch doubles for the first three steps, then stays
  lossitem    the loss of every step is kept as a Python float (.item())
  auroc       (a leak by design) torchmetrics' AUROC keeps every step's predictions
              on the GPU until compute() and reset()
Other models and libraries (none may be called a leak):
  resnet      torchvision's ResNet-50, batch 64 at 224 x 224, SGD with momentum, bf16
              autocast, channels_last
  vit         timm's ViT-B/16, batch 64, AdamW, bf16 autocast
  generate    inference only: transformers' generate() on a small Llama, 4 batches of
              256 new tokens (no optimizer, no training step)
Under torchrun (2 ranks, NCCL):
  rankleak    DDP; rank 1 alone keeps every step's logits, detached (a leak on one rank)
  fsdpleak    FSDP2 (fully_shard per encoder layer); a forward hook keeps every layer's
              output on every rank

    memdiag run -- torchrun --nproc-per-node 2 examples/patterns.py --case rankleak
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("hookleak", "detachleak", "cacheleak", "accum", "evalloop", "keepgrads", "ema",
         "warmup", "lossitem", "auroc", "resnet", "vit", "generate", "rankleak", "fsdpleak")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, HIDDEN, HEADS, LAYERS, CLASSES = 8192, 512, 8, 4, 1024


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, 4 * HIDDEN, batch_first=True,
                                           dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.emb(ids)))


def batch_of(n: int, gen: torch.Generator, dev: torch.device):
    ids = torch.randint(VOCAB, (n, ARGS.seq), generator=gen, device=dev)
    return ids, torch.randint(CLASSES, (n, ARGS.seq), generator=gen, device=dev)


def vision(a: argparse.Namespace, dev: torch.device) -> None:
    """An image classifier from torchvision or timm, trained a few steps."""
    if a.case == "resnet":
        import torchvision
        model = torchvision.models.resnet50(weights=None).to(dev, memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        import timm
        model = timm.create_model("vit_base_patch16_224", pretrained=False).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        images = torch.randn(64, 3, 224, 224, generator=gen, device=dev)
        if a.case == "resnet":
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(1000, (64,), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def generate(a: argparse.Namespace, dev: torch.device) -> None:
    """Greedy decoding with a randomly initialised Llama: the KV cache grows
    within each call and is freed after it."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=4 * HIDDEN,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=HEADS, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.no_grad():
        for _ in range(4):
            ids = torch.randint(VOCAB, (a.batch, 64), generator=gen, device=dev)
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=256,
                           min_new_tokens=256, do_sample=False, pad_token_id=0)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("patterns.py: CUDA is not available", file=sys.stderr)
        return 2
    rank = int(os.environ.get("RANK", "0"))
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    distributed = a.case in ("rankleak", "fsdpleak")
    if distributed:
        if int(os.environ.get("WORLD_SIZE", "1")) < 2:
            print(f"patterns.py: --case {a.case} runs under torchrun with 2 ranks", file=sys.stderr)
            return 2
        torch.distributed.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    if a.case in ("resnet", "vit"):
        vision(a, dev)
        return 0
    if a.case == "generate":
        generate(a, dev)
        return 0
    gen = torch.Generator(device=dev).manual_seed(rank)
    model = Tagger().to(dev)
    if a.case == "rankleak":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    if a.case == "fsdpleak":
        from torch.distributed.fsdp import fully_shard
        for block in model.encoder.layers:
            fully_shard(block)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kept, cache, losses = [], {}, []
    if a.case in ("hookleak", "fsdpleak"):  # a debugging hook left in: every output kept
        for block in model.encoder.layers:
            block.register_forward_hook(lambda mod, inp, out: kept.append(out))
    if a.case == "auroc":
        from torchmetrics.classification import MulticlassAUROC
        metric = MulticlassAUROC(num_classes=CLASSES, thresholds=None).to(dev)
    ema = None
    micro = 4 if a.case == "accum" else 1
    for step in range(a.steps):
        n = a.batch * (2 ** min(step, 3)) // 8 if a.case == "warmup" else a.batch
        for _ in range(micro):
            ids, labels = batch_of(n, gen, dev)
            logits = model(ids)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()) / micro
            loss.backward()
        if a.case == "detachleak" or (a.case == "rankleak" and rank == 1):
            kept.append(logits.detach())
        if a.case == "cacheleak":
            cache[step] = model.emb(ids).detach()
        if a.case == "lossitem":
            losses.append(loss.item())
        if a.case == "auroc":  # compute() and reset() only at the end of an epoch
            metric.update(logits.detach().flatten(0, 1), labels.flatten())
        opt.step()
        opt.zero_grad(set_to_none=a.case != "keepgrads")
        if a.case == "ema":
            with torch.no_grad():
                if ema is None:
                    ema = [p.detach().clone() for p in model.parameters()]
                for e, p in zip(ema, model.parameters()):
                    e.mul_(0.99).add_(p.detach(), alpha=0.01)
        if a.case == "evalloop":
            model.eval()
            with torch.no_grad():
                ids, labels = batch_of(4 * a.batch, gen, dev)
                acc = (model(ids).argmax(-1) == labels).float().mean()
            model.train()
            losses.append(float(acc))
    torch.cuda.synchronize()
    print(f"patterns.py {a.case}: rank {rank}, {a.steps} steps, kept {len(kept)} tensors, "
          f"cached {len(cache)}", flush=True)
    if distributed:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
