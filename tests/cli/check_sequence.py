#!/usr/bin/env python3
"""Checks memdiag's diagnosis of sequence models (tests/data/sequence,
captured on an H200 by `SCRIPT=examples/sequence.py sh tests/gpu/patterns.sh`
from examples/sequence.py): truncated BPTT over an LSTM (the hidden state
detached between chunks) and a T5 encoder-decoder are no leaks; T5's peak is
its activations, attention's the largest site.
    python3 tests/cli/check_sequence.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"tbptt": None, "t5": None})
act = finding("t5", "activations")
check("t5: activations 82% of the peak, attention the largest site",
      act["summary"].startswith("activations saved for backward are 82% of the peak") and
      act["sites"][0]["site"].endswith("sdpa_attention_forward"))
check("tbptt: no activations finding (the detached state keeps one chunk's graph)",
      not runs.findings("tbptt", "activations"))
sys.exit(runs.done())
