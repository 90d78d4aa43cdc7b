#!/usr/bin/env python3
"""Compares memdiag's replayed phase figures (diagnose --json on stdin)
with torch's own counters recorded by examples/workloads.py (argv[1]).
Prints the worst difference; exits 1 if any exceeds argv[2] MiB (0.01)."""
import json
import sys

PHASES = (("after_forward", "after_forward_mib"), ("after_backward", "after_backward_mib"),
          ("after_optimizer_step", "after_optimizer_step_mib"),
          ("after_clear_gradients", "after_clear_gradients_mib"))


def main():
    got = json.load(sys.stdin)["ranks"][0]
    ref = json.load(open(sys.argv[1]))
    tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
    samples = {(s["step"], s["phase"]): s for s in ref["samples"]}
    worst, bad, checked = 0.0, [], 0
    for st in got["steps"]:
        k = st["step"]
        pairs = [(samples.get((k, ph), {}).get("allocated_mib"), st[key]) for ph, key in PHASES]
        pairs.append((samples.get((k, "after_clear_gradients"), {}).get("peak_allocated_mib"),
                      st["peak_allocated_mib"]))
        for want, have in pairs:
            if want is None:
                continue
            checked += 1
            d = abs(want - have)
            worst = max(worst, d)
            if d > tol:
                bad.append((k, round(want, 3), round(have, 3)))
    print(f"{checked} figures, worst difference {worst:.4f} MiB", bad[:5])
    sys.exit(1 if bad or not checked else 0)


if __name__ == "__main__":
    main()
