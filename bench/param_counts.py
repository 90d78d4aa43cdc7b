#!/usr/bin/env python3
"""Parameter counts as transformers computes them (sum of numel over
model.parameters(), tied weights once), for every architecture of
bench/predict_grid.py plus gemma (v1), built on the meta device: no GPU
memory, no downloads. Writes each full config to DIR/<arch>.json and one
JSON line per architecture to stdout. `memdiag predict` must reproduce the
counts exactly (tests/unit/test_predict.c).

    python3 bench/param_counts.py DIR
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from predict_grid import ARCHS  # noqa: E402

EXTRA = {
    "gemma": dict(cls="GemmaConfig", hidden_size=1024, intermediate_size=4096,
                  num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=1,
                  head_dim=256, vocab_size=65536, max_position_embeddings=4096),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for arch, spec in list(ARCHS.items()) + list(EXTRA.items()):
        spec = dict(spec)
        cfg = getattr(transformers, spec.pop("cls"))(**spec)
        cfg.use_cache = False
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        n = sum(p.numel() for p in model.parameters())
        with open(os.path.join(out, arch + ".json"), "w") as f:
            json.dump(cfg.to_dict(), f, indent=1, sort_keys=True)
        print(json.dumps({"arch": arch, "params": n,
                          "transformers": transformers.__version__}), flush=True)


if __name__ == "__main__":
    main()
