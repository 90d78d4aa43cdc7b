#!/usr/bin/env python3
"""Layer streaming (seed 001's stream_layers) for `memdiag predict
--stream-layers K` (issue 5): LoRA on a frozen base whose decoder layers'
frozen weights live in pinned host memory. K GPU buffers, each as large as
one layer's frozen weights, are filled round-robin before a layer's forward
and again when its backward needs them (saved-tensor hooks keep a handle to
the weight, not the buffer's contents). Embeddings, lm_head, the final norm
and the adapters stay on the GPU.

    python3 bench/predict_stream.py > stream.jsonl
    STREAM_GC=1 python3 bench/predict_stream.py > stream_gc.jsonl   # with checkpointing

One JSON object per step, in the grid's format (bench/predict_grid.py: the
third step, peak reset at its start, labels = ids, the output kept until
after optimizer.step()), options {"lora": 8, "targets": [...], "stream": K}.
"""
import gc
import json
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import predict_grid as g  # noqa: E402


class Streamer:
    """K GPU buffers holding the frozen weights of K decoder layers."""

    def __init__(self, layers, k, dev):
        self.host = []  # per layer: [(parameter, pinned host copy)]
        for layer in layers:
            items = []
            for p in layer.parameters():
                if not p.requires_grad:
                    items.append((p, p.data.to("cpu").pin_memory()))
                    p.data = torch.empty(0, dtype=p.dtype, device=dev)
            self.host.append(items)
        n = max(sum(h.numel() for _, h in items) for items in self.host)
        self.buffers = [torch.empty(n, dtype=self.host[0][0][1].dtype, device=dev)
                        for _ in range(k)]
        self.ptrs = [b.untyped_storage().data_ptr() for b in self.buffers]
        self.owner = [None] * k  # buffer -> layer
        self.slot = {}           # layer -> buffer
        self.turn = 0

    def load(self, i):
        if i in self.slot:
            return self.slot[i]
        b = self.turn
        self.turn = (self.turn + 1) % len(self.buffers)
        old = self.owner[b]
        if old is not None:
            for p, _ in self.host[old]:
                p.data = torch.empty(0, dtype=p.dtype, device=p.device)
            del self.slot[old]
        off = 0
        for p, h in self.host[i]:
            view = self.buffers[b][off:off + h.numel()].view(h.shape)
            view.copy_(h, non_blocking=True)
            p.data = view
            off += h.numel()
        self.owner[b], self.slot[i] = i, b
        return b

    def pack(self, t):
        try:
            ptr = t.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return t
        if ptr in self.ptrs:  # a streamed weight: remember which, not what
            b = self.ptrs.index(ptr)
            return ("w", self.owner[b], t.size(), t.stride(), t.storage_offset())
        return t

    def unpack(self, x):
        if isinstance(x, tuple) and x and x[0] == "w":
            _, layer, size, stride, offset = x
            b = self.load(layer)
            return torch.as_strided(self.buffers[b], size, stride, offset)
        return x


def decoder_layers(model):
    base = model.base_model.model  # peft
    return base.model.layers


CASES = [("final", "smollm2-135m"), ("final", "qwen2.5-1.5b"), ("real", "qwen2.5-0.5b"),
         ("real", "llama3.2-1b"), ("final", "tinyllama-1.1b"), ("real", "smollm2-360m")]
SEQS = [2048, 4096, 6144]


def one(table, arch, batch, seq, k, prec, opt_name="adamw", gc_mode=None):
    cfg = g.build(arch, g.FINAL if table == "final" else g.REAL)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    with dev:
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    if prec == "bf16-pure":
        model = model.to(torch.bfloat16)
    # peft's LoRA and checkpointing as the grid applies them; recomputation
    # reloads each layer through its forward hook
    options = dict({"lora": 8, "targets": ["q_proj", "v_proj"]},
                   **({"gc": gc_mode} if gc_mode else {}))
    model = g.with_options(model, options)
    params = sum(p.numel() for p in model.parameters())  # with the adapters, as the grid
    model.train()
    layers = decoder_layers(model)
    st = Streamer(layers, k, dev)
    for i, layer in enumerate(layers):
        def before_forward(mod, args, i=i):
            st.load(i)
        layer.register_forward_pre_hook(before_forward)
    gc.collect()
    torch.cuda.empty_cache()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = g.make_optimizer(opt_name, [p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(cfg.vocab_size, (batch, seq), device=dev)
    with torch.autograd.graph.saved_tensors_hooks(st.pack, st.unpack):
        before, to_backward, peak = g.steady_steps(model, opt, ids, prec)
    row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt_name, "precision": prec,
           "options": dict(options, stream=k), "params": params,
           "trainable": trainable, "peak_allocated": peak, "allocated_before_step": before,
           "peak_to_backward": to_backward, "max_reserved": torch.cuda.max_memory_reserved(),
           "config": cfg.to_dict()}
    del model, opt, ids, st
    gc.collect()
    torch.cuda.empty_cache()
    return row


# With STREAM_GC=1: gradient checkpointing too (seed 001's record is
# reproduced with it), on three of the models.
GC_CASES = [("final", "smollm2-135m"), ("real", "qwen2.5-0.5b"), ("real", "llama3.2-1b")]


def main_gc(budget):
    t0 = time.time()
    for table, arch in GC_CASES:
        for seq in SEQS:
            for prec in ("bf16-pure", "bf16-autocast"):
                if time.time() - t0 > budget:
                    return
                try:
                    row = one(table, arch, 1, seq, 2, prec, gc_mode="default")
                except Exception as e:  # a failing row is data too
                    row = {"arch": arch, "seq": seq, "stream": 2, "precision": prec, "gc": 1,
                           "error": f"{type(e).__name__}: {e}"[:300]}
                    gc.collect()
                    torch.cuda.empty_cache()
                print(json.dumps(row), flush=True)


def main():
    budget = float(os.environ.get("BUDGET", "240"))
    if os.environ.get("STREAM_GC"):
        return main_gc(budget)
    t0 = time.time()
    for table, arch in CASES:
        for seq in SEQS:
            for k, prec in ((2, "bf16-pure"), (3 if seq == 4096 else 2, "fp32")):
                if time.time() - t0 > budget:
                    return
                try:
                    row = one(table, arch, 1, seq, k, prec)
                except Exception as e:  # a failing row is data too
                    row = {"arch": arch, "seq": seq, "stream": k, "precision": prec,
                           "error": f"{type(e).__name__}: {e}"[:300]}
                    gc.collect()
                    torch.cuda.empty_cache()
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
