#!/usr/bin/env python3
"""wall.py N CMD [ARG...]: the best wall time of N runs of CMD, in seconds.

The clock is read in this process right around each child (fork, exec, the
run, exit and wait), the same way for memdiag and for python3's
pickle.load. (bench/run.sh used to take each time from `date` run before and
after the command: the second `date`'s own start, about a millisecond, was
counted in every run.) Output goes to /dev/null; a failing run fails."""
import os
import subprocess
import sys
import time


def timed(cmd, null, env=None):
    """Wall seconds of one run of cmd (a list), its output to null; a
    failing run ends the script."""
    t0 = time.perf_counter_ns()
    rc = subprocess.run(cmd, stdout=null, stderr=null, env=env).returncode
    t = time.perf_counter_ns() - t0
    if rc != 0:
        sys.exit("failed (exit %d): %s" % (rc, " ".join(cmd)))
    return t / 1e9


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: wall.py N CMD [ARG...]")
    runs, cmd = int(sys.argv[1]), sys.argv[2:]
    with open(os.devnull, "wb") as null:
        best = min(timed(cmd, null) for _ in range(runs))
    print("%.4f" % best)


if __name__ == "__main__":
    main()
