#!/usr/bin/env python3
"""Models whose weights are made on the GPU itself (no `.to(device)`), for
checking memdiag's categories and its optimizer_state finding (none leaks).
Run a case under `memdiag run`:

    memdiag run -- python3 examples/ondevice.py --case ctxdevice

  ctxdevice  a transformer LM built inside `with torch.device("cuda")`, as
             torchtitan and lit-gpt build theirs, trained with AdamW
  handmade   an MLP of raw tensors made with requires_grad (a notebook's
             hand-written model), trained with Adam
  hfload     a Llama saved with save_pretrained and loaded back with
             from_pretrained(device_map="cuda", dtype=bfloat16), trained with
             AdamW
  fabric     Lightning Fabric's init_module() under bf16-true precision (the
             weights made on the GPU in bf16), trained with AdamW
"""
from __future__ import annotations

import argparse
import sys
import tempfile

CASES = ("ctxdevice", "handmade", "hfload", "fabric")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, LAYERS, SEQ, BATCH = 32000, 768, 6, 512, 8


def encoder_lm() -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False))


def lm_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    return nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())


def ctxdevice(a: argparse.Namespace, dev: torch.device) -> None:
    with torch.device(dev):
        model = encoder_lm()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        lm_loss(model, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def handmade(a: argparse.Namespace, dev: torch.device) -> None:
    gen = torch.Generator(device=dev).manual_seed(0)
    dims = (2048, 4096, 4096, 4096, 1000)
    params = []
    for fan_in, fan_out in zip(dims, dims[1:]):
        w = (torch.randn(fan_in, fan_out, generator=gen, device=dev) / fan_in ** 0.5)
        params += [w.requires_grad_(), torch.zeros(fan_out, device=dev, requires_grad=True)]
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(a.steps):
        x = torch.randn(512, dims[0], generator=gen, device=dev)
        y = torch.randint(dims[-1], (512,), generator=gen, device=dev)
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = torch.relu(h)
        nn.functional.cross_entropy(h, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hfload(a: argparse.Namespace, dev: torch.device) -> None:
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816,
                                   num_hidden_layers=8, num_attention_heads=16,
                                   num_key_value_heads=8, max_position_embeddings=2048)
    with tempfile.TemporaryDirectory() as d:
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
        model = transformers.AutoModelForCausalLM.from_pretrained(d, device_map="cuda",
                                                                  dtype=torch.bfloat16)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (4, SEQ), generator=gen, device=dev)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def fabric(a: argparse.Namespace, dev: torch.device) -> None:
    import lightning as L
    f = L.Fabric(accelerator="cuda", devices=1, precision="bf16-true")
    with f.init_module():
        model = encoder_lm()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = f.setup(model, opt)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        f.backward(lm_loss(model, ids))
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("ondevice.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"ctxdevice": ctxdevice, "handmade": handmade, "hfload": hfload,
     "fabric": fabric}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"ondevice.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
