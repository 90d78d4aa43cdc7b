#!/usr/bin/env python3
"""split_probe.py FILE...: what a second reader starting mid-trace would meet.

Measures, on real pickles, the assumptions of reading a snapshot's trace on
two CPUs (bench/RESULTS.md, session 43): a second reader starts at R, the
first batch start (MARK, then a trace entry: a dict whose first key is
'action') after the FRAME nearest SPLIT of the file (default 0.556), with
the memo count B there; it reads to E, where the trace list ends. For each
file it prints:
  frames     FRAME opcodes (the places a reader can start without parsing)
  R, B       the start (fraction of the file) and the memo count there
  records    trace entries in [R, E)
  gets       memo gets in [R, E): local (slot >= B), or remote by what the
             slot holds: a key, an action name, another string, a list
             (a frames list), a dict (a frame), other
  seedable   remote gets of keys and action names (the walkers of [0, R)
             can hand those over)
  deferred   entries whose frames (a list or a frame in it) are remote:
             their stack is resolved once the first reader reaches R
  after E    gets after E of slots the second reader filled ([B, B_E))
Python's stdlib only (pickletools), so it reads any pickle; slow (~10 s for
6 MB)."""
import pickletools
import sys

KEYS = {"action", "addr", "size", "stream", "time_us", "frames", "device_free",
        "pool_id", "name", "filename", "line", "blocks", "compile_context",
        "user_metadata", "address", "requested_size", "state", "device",
        "total_size", "allocated_size", "active_size", "segment_type",
        "is_expandable", "segment_pool_id"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc",
           "segment_free", "segment_map", "segment_unmap", "snapshot", "oom",
           "annotate"}
GETS = {"BINGET", "LONG_BINGET", "GET"}
STRS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}


def kind_of(prev_name, prev_arg):
    if prev_name in STRS:
        if prev_arg in KEYS:
            return "key"
        return "action" if prev_arg in ACTIONS else "str"
    return {"EMPTY_LIST": "list", "EMPTY_DICT": "dict"}.get(prev_name, "other")


def ops_of(path):
    """Every opcode as (name, arg, pos), and the memo: per slot its kind and
    the index of the opcode that filled it."""
    data = open(path, "rb").read()
    ops = [(op.name, arg, pos) for op, arg, pos in pickletools.genops(data)]
    kinds, memo_at = [], []
    for i, (name, arg, _) in enumerate(ops):
        if name == "MEMOIZE":
            kinds.append(kind_of(*ops[i - 1][:2]))
            memo_at.append(i)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            sys.exit("%s: explicit memo puts (not Python's protocol 4+): no split" % path)
    return len(data), ops, kinds, memo_at


def action_slot(ops, kinds):
    n = 0
    for i, (name, arg, _) in enumerate(ops):
        if name == "MEMOIZE":
            if ops[i - 1][0] in STRS and ops[i - 1][1] == "action":
                return n
            n += 1
    return None


def start_of(ops, size, split, act):
    """The index of R's EMPTY_DICT, or None."""
    frames = [i for i, o in enumerate(ops) if o[0] == "FRAME"]
    if not frames:
        return None, 0
    f = min(frames, key=lambda i: abs(ops[i][2] - split * size))
    for i in range(f, len(ops) - 4):
        if (ops[i - 1][0] == "MARK" and ops[i][0] == "EMPTY_DICT" and ops[i + 1][0] == "MEMOIZE"
                and ops[i + 2][0] == "MARK" and ops[i + 3][0] in GETS and ops[i + 3][1] == act):
            return i, len(frames)
    return None, len(frames)


def end_of(ops, r):
    """E: the first opcode after R's batches (at the trace list's level)."""
    depth = 1  # the batch's MARK before R
    i = r
    while i < len(ops):
        name = ops[i][0]
        if name == "MARK":
            depth += 1
        elif name in ("APPENDS", "SETITEMS", "TUPLE", "DICT", "LIST", "POP_MARK"):
            depth -= 1
        closed = depth == 0 and (name == "APPENDS" or name == "APPEND")
        if depth < 0 or (depth == 0 and name not in ("APPENDS", "APPEND", "SETITEMS")):
            return i
        if closed:  # another batch (MARK, or one entry and APPEND), or the end
            nxt = ops[i + 1][0]
            if nxt == "MARK":
                i += 1
                depth = 1
            elif nxt != "EMPTY_DICT":
                return i + 1
        i += 1
    return i


def probe(path, split):
    size, ops, kinds, memo_at = ops_of(path)
    act = action_slot(ops, kinds)
    if act is None:
        return "%s: no trace entries" % path
    r, nframes = start_of(ops, size, split, act)
    if r is None:
        return "%s: %d FRAMEs, no batch start after the split" % (path, nframes)
    base = sum(1 for o in ops[:r] if o[0] == "MEMOIZE")
    e = end_of(ops, r)
    b_e = base + sum(1 for o in ops[r:e] if o[0] == "MEMOIZE")
    gets = {"local": 0, "key": 0, "action": 0, "str": 0, "list": 0, "dict": 0, "other": 0}
    records = deferred = 0
    rec_deferred = False
    for i in range(r, e):
        name, arg, _ = ops[i]
        if name == "EMPTY_DICT" and ops[i + 2][0] == "MARK" and ops[i + 3][0] in GETS and \
                ops[i + 3][1] == act:
            records += 1
            deferred += rec_deferred
            rec_deferred = False
        if name in GETS:
            k = "local" if arg >= base else kinds[arg]
            gets[k] += 1
            if k in ("list", "dict"):
                rec_deferred = True
    deferred += rec_deferred
    after = sum(1 for o in ops[e:] if o[0] in GETS and base <= o[1] < b_e)
    remote = sum(v for k, v in gets.items() if k != "local")
    return ("%s: %.1f MB, %d frames, R %.3f, B %d, E %.3f, records %d, gets %d: local %d, "
            "remote %d (key %d, action %d, str %d, list %d, dict %d, other %d), seedable %d, "
            "deferred %d, after E %d" % (
                path, size / 1e6, nframes, ops[r][2] / size, base, ops[min(e, len(ops) - 1)][2] / size,
                records, sum(gets.values()), gets["local"], remote, gets["key"], gets["action"],
                gets["str"], gets["list"], gets["dict"], gets["other"],
                gets["key"] + gets["action"], deferred, after))


def main():
    args = sys.argv[1:]
    split = 0.556
    if args and args[0].startswith("--split="):
        split = float(args.pop(0).split("=", 1)[1])
    if not args:
        sys.exit(__doc__.splitlines()[0])
    for path in args:
        print(probe(path, split), flush=True)


if __name__ == "__main__":
    main()
