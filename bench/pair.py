#!/usr/bin/env python3
"""pair.py ROUNDS FILE MEMDIAG PYTHON: memdiag against pickle.load, round by round.

Each round times `MEMDIAG summary FILE` three times (its best counts) and
`PYTHON -c 'pickle.load(...)' FILE` once, back to back, so both see the
host in the same state; on a shared VM whose speed drifts by tens of
percent from one minute to the next, a ratio of two bests taken minutes
apart says more about the drift than about memdiag. Prints memdiag's best
seconds, pickle.load's best seconds, and the median, lowest and highest of
the rounds' ratios (pickle.load's time / memdiag's). Clocks as bench/wall.py."""
import os
import statistics
import sys

from wall import timed

LOAD = 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))'


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: pair.py ROUNDS FILE MEMDIAG PYTHON")
    rounds, path, memdiag, python = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    ours, theirs, ratios = [], [], []
    with open(os.devnull, "wb") as null:
        for _ in range(rounds):
            m = min(timed([memdiag, "summary", path], null) for _ in range(3))
            p = timed([python, "-c", LOAD, path], null)
            ours.append(m)
            theirs.append(p)
            ratios.append(p / m)
    print("%.4f %.4f %.1f %.1f %.1f" % (min(ours), min(theirs), statistics.median(ratios),
                                        min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
