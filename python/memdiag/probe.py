"""`memdiag probe`: measures, on this machine's GPU and torch, the constants
`memdiag predict` depends on, and writes them as a calibration file
(`memdiag predict --calibration FILE`). Each figure is measured, never
assumed:

  cuda_context_bytes      device memory in use outside PyTorch's allocator
                          once CUDA, cuBLAS and attention kernels are loaded
  cublas_workspace_bytes  what a forward and a backward matmul leave allocated
                          (one cuBLAS workspace per handle and stream)
  loss_bytes_per_logit    the peak of transformers' causal-LM loss backward,
                          per logit element, over bf16 logits (slope between
                          two token counts, seed 001's probe)
  sdpa_math_bytes_per_score  bytes the math attention path keeps per
                          batch x head x query x key (fp32)
  sdpa                    saved bytes per token of each backend, for reading

    python3 -m memdiag.probe [--out FILE]
"""
import argparse
import datetime
import gc
import json
import sys

MIB = 1 << 20


def _clean(torch):
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _loss(torch, logits, labels):
    """transformers' ForCausalLMLoss when importable, else the same steps."""
    try:
        from transformers.loss.loss_utils import ForCausalLMLoss
        return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1])
    except Exception:  # noqa: BLE001 - older or absent transformers
        f = torch.nn.functional
        logits = logits.float()
        labels = f.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return f.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                               ignore_index=-100, reduction="mean")


def loss_peak(torch, tokens, vocab):
    _clean(torch)
    logits = torch.randn(1, tokens, vocab, device="cuda", dtype=torch.bfloat16,
                         requires_grad=True)
    labels = torch.randint(vocab, (1, tokens), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    _loss(torch, logits, labels).backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del logits, labels
    return peak


def loss_bytes_per_logit(torch, vocab=32768):
    """Slope of the loss backward's peak over token count: fixed costs
    cancel. The logits' own gradient (bf16) is the user's, not the loss's."""
    small, large = 1024, 2048
    slope = (loss_peak(torch, large, vocab) - loss_peak(torch, small, vocab)) / (vocab * (large - small))
    return round(slope, 3)


def workspace_bytes(torch):
    _clean(torch)
    before = torch.cuda.memory_allocated()
    x = torch.randn(256, 256, device="cuda", requires_grad=True)
    w = torch.randn(256, 256, device="cuda", requires_grad=True)
    (x @ w).sum().backward()
    torch.cuda.synchronize()
    del x, w
    gc.collect()
    return torch.cuda.memory_allocated() - before


def sdpa_saved(torch, backend, dtype, heads=8, seq=1024, dim=64):
    """Bytes kept for backward by one causal SDPA call, per token (the
    output excluded), or None where the backend refuses the inputs."""
    from torch.nn.attention import sdpa_kernel
    _clean(torch)
    q, k, v = (torch.randn(1, heads, seq, dim, device="cuda", dtype=dtype, requires_grad=True)
               for _ in range(3))
    base = torch.cuda.memory_allocated()
    try:
        if backend is None:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    except RuntimeError:
        return None
    torch.cuda.synchronize()
    saved = torch.cuda.memory_allocated() - base - out.numel() * out.element_size()
    del out, q, k, v
    return saved / seq


def sdpa_table(torch):
    from torch.nn.attention import SDPBackend
    table = {}
    for dname, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        for bname, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                               ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                               ("math", SDPBackend.MATH), ("default", None)):
            table[f"{bname}_{dname}_bytes_per_token"] = sdpa_saved(torch, backend, dtype)
    return table


def math_bytes_per_score(torch, heads=8, dim=64):
    """The math path's per-score cost: the slope of its saved bytes between
    two sequence lengths, over batch x heads x query x key."""
    from torch.nn.attention import SDPBackend
    a = sdpa_saved(torch, SDPBackend.MATH, torch.float32, heads, 512, dim) * 512
    b = sdpa_saved(torch, SDPBackend.MATH, torch.float32, heads, 1024, dim) * 1024
    # saved = c1 * S + c2 * H * S^2  ->  c2 from two S
    c2 = (b - 2 * a) / (heads * (1024 * 1024 - 2 * 512 * 512))
    return round(c2, 3)


def warm_up(torch):
    """Load the kernels a training step loads (CUDA loads modules lazily,
    and each adds to the context): a small causal LM's steps in fp32 and
    bf16 autocast with AdamW, or plain layers without transformers."""
    try:
        import transformers
        cfg = transformers.LlamaConfig(hidden_size=1024, intermediate_size=2816,
                                       num_hidden_layers=2, num_attention_heads=16,
                                       num_key_value_heads=4, vocab_size=32000)
        model = transformers.AutoModelForCausalLM.from_config(cfg).cuda()
        step = lambda ids: model(input_ids=ids, labels=ids).loss  # noqa: E731
    except Exception:  # noqa: BLE001 - without transformers: torch layers
        nn = torch.nn
        model = nn.Sequential(nn.Embedding(1024, 256), nn.LayerNorm(256), nn.Linear(256, 512),
                              nn.GELU(), nn.Linear(512, 1024)).cuda()
        step = lambda ids: nn.functional.cross_entropy(  # noqa: E731
            model(ids).view(-1, 1024), ids.view(-1))
    opt = torch.optim.AdamW(model.parameters())
    ids = torch.randint(1024, (4, 512), device="cuda")
    for autocast in (False, True, False):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = step(ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del model, opt, ids, loss


def context_bytes(torch):
    """In use on the device but not by PyTorch's allocator, after the work
    above loaded cuBLAS and the attention kernels."""
    _clean(torch)
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="memdiag probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="memdiag-calibration.json")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("memdiag probe: torch is not importable by this python", file=sys.stderr)
        return 2
    try:
        if not torch.cuda.is_available():
            print("memdiag probe: no CUDA device visible to torch", file=sys.stderr)
            return 2
        cal = measure(torch)
        with open(args.out, "w") as f:
            json.dump(cal, f, indent=2)
            f.write("\n")
    except Exception as e:  # noqa: BLE001 - one line, not a traceback
        print(f"memdiag probe: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    print(f"memdiag probe: {cal['gpu']}, torch {cal['torch']}: context "
          f"{cal['cuda_context_bytes'] / MIB:.0f} MiB, cuBLAS workspaces "
          f"{cal['cublas_workspace_bytes'] / MIB:.0f} MiB, loss "
          f"{cal['loss_bytes_per_logit']} bytes per logit element, math attention "
          f"{cal['sdpa_math_bytes_per_score']} bytes per score -> {args.out}")
    return 0


def measure(torch):
    """Every figure of the calibration file, measured on device 0."""
    torch.cuda.init()
    cal = {"memdiag_calibration": 1,
           "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__,
           "cuda": torch.version.cuda,
           "measured": datetime.date.today().isoformat()}
    try:
        import transformers
        cal["transformers"] = transformers.__version__
    except ImportError:
        cal["transformers"] = None
    cal["cublas_workspace_bytes"] = workspace_bytes(torch)
    cal["loss_bytes_per_logit"] = loss_bytes_per_logit(torch)
    cal["sdpa_math_bytes_per_score"] = math_bytes_per_score(torch)
    cal["sdpa"] = sdpa_table(torch)
    warm_up(torch)
    cal["cuda_context_bytes"] = context_bytes(torch)
    return cal


if __name__ == "__main__":
    sys.exit(main())
