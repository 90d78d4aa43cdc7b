#!/usr/bin/env python3
"""Library features and their memory, for checking memdiag's diagnosis on
code it was not written against (after patterns.py, loops.py, shapes.py
and schedules.py). Run a case under `memdiag run`:

    memdiag run -- python3 examples/libraries.py --case offload

  offload     activations saved on the CPU (torch.autograd.graph.save_on_cpu): the
              GPU keeps few of them
  prefetch    ResNet-18 fed by a data prefetcher that copies the next batch on a side
              stream (record_stream), as NVIDIA's examples do
  cudnnbench  ResNet-50 with torch.backends.cudnn.benchmark: the first step tries
              algorithms with large workspaces
  hfeval      the Hugging Face Trainer evaluating every 3 steps without
              eval_accumulation_steps: the logits of the whole evaluation set are
              gathered on the GPU, then moved to the CPU
  customfn    (a leak) a custom autograd.Function keeps each call's input in a list
              "for debugging"
"""
from __future__ import annotations

import argparse
import sys

CASES = ("offload", "prefetch", "cudnnbench", "hfeval", "customfn")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768
DEBUG_INPUTS = []


class Scale(torch.autograd.Function):
    """y = 2x, with its input kept in a module-level list."""

    @staticmethod
    def forward(ctx, x):
        DEBUG_INPUTS.append(x)
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def lm(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if a.case == "offload":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    logits = model(ids)
            else:
                h = model[1](model[0](ids))
                logits = model[2](Scale.apply(h))
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class Prefetcher:
    """Copies the next batch to the GPU on a side stream while this one trains."""

    def __init__(self, batches, dev: torch.device) -> None:
        self.batches, self.dev = iter(batches), dev
        self.stream = torch.cuda.Stream(dev)
        self.load()

    def load(self) -> None:
        try:
            x, y = next(self.batches)
        except StopIteration:
            self.next = None
            return
        with torch.cuda.stream(self.stream):
            self.next = (x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True))

    def get(self):
        torch.cuda.current_stream(self.dev).wait_stream(self.stream)
        batch = self.next
        if batch is not None:
            for t in batch:
                t.record_stream(torch.cuda.current_stream(self.dev))
            self.load()
        return batch


def vision(a: argparse.Namespace, dev: torch.device) -> None:
    import torchvision
    torch.backends.cudnn.benchmark = a.case == "cudnnbench"
    net = torchvision.models.resnet50 if a.case == "cudnnbench" else torchvision.models.resnet18
    model = net(weights=None).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    n = 64
    batches = [(torch.randn(n, 3, 224, 224).pin_memory(), torch.randint(1000, (n,)).pin_memory())
               for _ in range(a.steps)]
    feed = Prefetcher(batches, dev)
    while (batch := feed.get()) is not None:
        images, labels = batch
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_eval(a: argparse.Namespace) -> None:
    import transformers
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=512, n_embd=512, n_layer=4,
                                  n_head=8)
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(VOCAB, (8 * a.steps + 64, 256))
    train = [{"input_ids": x, "labels": x} for x in ids[:8 * a.steps]]
    held_out = [{"input_ids": x, "labels": x} for x in ids[8 * a.steps:]]
    args = transformers.TrainingArguments(
        output_dir="/tmp/hf-eval", max_steps=a.steps, per_device_train_batch_size=8,
        per_device_eval_batch_size=16, eval_strategy="steps", eval_steps=3, bf16=True,
        report_to=[], save_strategy="no", logging_strategy="no", dataloader_pin_memory=False)
    transformers.Trainer(model=model, args=args, train_dataset=train, eval_dataset=held_out,
                         compute_metrics=lambda p: {"n": len(p.predictions)}).train()


def main() -> int:
    if not torch.cuda.is_available():
        print("libraries.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case in ("prefetch", "cudnnbench"):
        vision(ARGS, dev)
    elif ARGS.case == "hfeval":
        hf_eval(ARGS)
    else:
        lm(ARGS, dev)
    torch.cuda.synchronize()
    print(f"libraries.py {ARGS.case}: done, {len(DEBUG_INPUTS)} inputs kept", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
