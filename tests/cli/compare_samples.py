#!/usr/bin/env python3
"""Compares memdiag's replayed phase figures (diagnose --json on stdin)
with torch's own counters recorded by examples/workloads.py (argv[1]):
allocated after each phase, the step's peak and the reserved memory at its
end, on every device the snapshot traces (a sample without a device is
device 0's), and that the steps found are the run's last ones, numbered
alike. Prints the worst difference; exits 1 if any exceeds argv[2] MiB
(0.01), if a device with samples has no rank in memdiag's output, or if
the steps differ."""
import json
import sys

PHASES = (("after_forward", "after_forward_mib"), ("after_backward", "after_backward_mib"),
          ("after_optimizer_step", "after_optimizer_step_mib"),
          ("after_clear_gradients", "after_clear_gradients_mib"))


def pairs(rank, samples):
    """(torch's figure, memdiag's figure) for each phase of each step."""
    for st in rank["steps"]:
        k = st["step"]
        for ph, key in PHASES:
            yield k, samples.get((k, ph), {}).get("allocated_mib"), st[key]
        end = samples.get((k, "after_clear_gradients"), {})
        yield k, end.get("peak_allocated_mib"), st["peak_allocated_mib"]
        yield k, end.get("reserved_mib"), st["reserved_mib"]


def main():
    ranks = {r["device"]: r for r in json.load(sys.stdin)["ranks"]}
    ref = json.load(open(sys.argv[1]))
    tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
    by_dev = {}
    for s in ref["samples"]:
        by_dev.setdefault(s.get("device", 0), {})[(s["step"], s["phase"])] = s
    worst, bad, checked = 0.0, [], 0
    for dev, samples in sorted(by_dev.items()):
        if dev not in ranks:
            print(f"device {dev}: samples but no rank in memdiag's output")
            sys.exit(1)
        # the steps found are the run's, numbered as it numbers them (a
        # history cut by its ring buffer keeps the last ones)
        mine = [st["step"] for st in ranks[dev]["steps"]]
        run = sorted({k for k, _ in samples if k >= 0})
        if not mine or mine != run[len(run) - len(mine):]:
            print(f"device {dev}: steps {mine}, the run's {run}")
            sys.exit(1)
        for k, want, have in pairs(ranks[dev], samples):
            if want is None:
                continue
            checked += 1
            d = abs(want - have)
            worst = max(worst, d)
            if d > tol:
                bad.append((dev, k, round(want, 3), round(have, 3)))
    print(f"{checked} figures on {len(by_dev)} device(s), worst difference {worst:.4f} MiB",
          bad[:5])
    sys.exit(1 if bad or not checked else 0)


if __name__ == "__main__":
    main()
