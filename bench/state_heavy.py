#!/usr/bin/env python3
"""state_heavy.py [--bare] IN OUT [COPIES]: a snapshot whose trace explains none of its
final state: IN's segments (and their blocks) COPIES times (default 8), each
copy at addresses shifted by its own 2^44, and an empty trace, as a
late-started or state-only recording of a big job leaves it. --bare drops
every segment's and block's frames too, as torch.cuda.memory_snapshot()
gives them in a job that never recorded a history (about 56 bytes a block:
the densest snapshot there is). The replay
then reconstructs every block from the final state (model/replay.c
seed_state), the path a scan per block made quadratic: e.g.

    xz -dc ../shared/fixtures/bench/big_gamma.pickle.xz >/tmp/g.pickle
    python3 bench/state_heavy.py /tmp/g.pickle /tmp/heavy.pickle 8
    /usr/bin/time -f '%e s' build/memdiag summary /tmp/heavy.pickle

IN is one of the bench's own files (read with pickle.load: trusted input)."""
import pickle
import sys


def main():
    args = sys.argv[1:]
    bare = bool(args) and args[0] == "--bare"
    args = args[1:] if bare else args
    if len(args) not in (2, 3):
        sys.exit(__doc__.splitlines()[0])
    copies = int(args[2]) if len(args) == 3 else 8
    with open(args[0], "rb") as f:
        snap = pickle.load(f)
    segs = []
    for k in range(copies):
        shift = (k + 1) << 44
        for s in snap["segments"]:
            t = dict(s, address=s["address"] + shift)
            t["blocks"] = [dict(b, address=b["address"] + shift) for b in s["blocks"]]
            if bare:
                t.pop("frames", None)
                for b in t["blocks"]:
                    b.pop("frames", None)
            segs.append(t)
    snap["segments"] = segs
    snap["device_traces"] = [[] for _ in snap.get("device_traces", [[]])]
    with open(args[1], "wb") as f:
        pickle.dump(snap, f, protocol=4)
    print("%d segments, %d blocks" % (len(segs), sum(len(s["blocks"]) for s in segs)))


if __name__ == "__main__":
    main()
