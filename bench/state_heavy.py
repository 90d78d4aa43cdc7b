#!/usr/bin/env python3
"""state_heavy.py IN OUT [COPIES]: a snapshot whose trace explains none of its
final state: IN's segments (and their blocks) COPIES times (default 8), each
copy at addresses shifted by its own 2^44, and an empty trace, as a
late-started or state-only recording of a big job leaves it. The replay
then reconstructs every block from the final state (model/replay.c
seed_state), the path a scan per block made quadratic: e.g.

    xz -dc ../shared/fixtures/bench/big_gamma.pickle.xz >/tmp/g.pickle
    python3 bench/state_heavy.py /tmp/g.pickle /tmp/heavy.pickle 8
    /usr/bin/time -f '%e s' build/memdiag summary /tmp/heavy.pickle

IN is one of the bench's own files (read with pickle.load: trusted input)."""
import pickle
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.splitlines()[0])
    copies = int(sys.argv[3]) if len(sys.argv) == 4 else 8
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    segs = []
    for k in range(copies):
        shift = (k + 1) << 44
        for s in snap["segments"]:
            t = dict(s, address=s["address"] + shift)
            t["blocks"] = [dict(b, address=b["address"] + shift) for b in s["blocks"]]
            segs.append(t)
    snap["segments"] = segs
    snap["device_traces"] = [[] for _ in snap.get("device_traces", [[]])]
    with open(sys.argv[2], "wb") as f:
        pickle.dump(snap, f, protocol=4)
    print("%d segments, %d blocks" % (len(segs), sum(len(s["blocks"]) for s in segs)))


if __name__ == "__main__":
    main()
