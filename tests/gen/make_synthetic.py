#!/usr/bin/env python3
"""Writes the synthetic snapshots the unit tests read (tests/data/synthetic).

Each file exercises one schema generation or pickler style of
torch.cuda.memory._snapshot(); real H200 snapshots live beside them in
tests/data/seed-exercise. The expected replay results are stated next to
each trace and asserted in tests/unit/test_snapshot.c.

    python3 tests/gen/make_synthetic.py tests/data/synthetic
"""
import gzip
import os
import pickle
import struct
import sys

import reframe

MIB = 1 << 20
A = 0x7F0000000000          # small segment (2 MiB)
B = 0x7F0000200000          # large segment (20 MiB)

FRAMES_USER = [
    {"name": "forward", "filename": "/home/u/model.py", "line": 12},
    {"name": "_call_impl", "filename": "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "line": 1790},
    {"name": "train", "filename": "/home/u/train.py", "line": 40},
]


def base_trace(t0=None, frames=True, extra=None):
    """The reference trace. Block sizes after torch's rules:
    alloc 1000 B -> 1024; alloc 512 B -> 512; alloc 5 MiB in a 20 MiB segment
    -> split, 5 MiB; alloc 15128640 B in the 15 MiB rest -> rounds to 15129088,
    remainder 599552 <= 1 MiB so not split: the whole 15 MiB block.
    Peak allocated 1024+512+5 MiB+15 MiB = 20973056; after the free of the
    first block 20972032; reserved 2 MiB + 20 MiB = 23068672."""
    fr = FRAMES_USER if frames else []
    ev = [
        ("segment_alloc", A, 2 * MIB), ("alloc", A, 1000), ("alloc", A + 1024, 512),
        ("segment_alloc", B, 20 * MIB), ("alloc", B, 5 * MIB),
        ("alloc", B + 5 * MIB, 15128640),
        ("free_requested", A, 1000), ("free_completed", A, 1000),
    ]
    out = []
    for i, (act, addr, size) in enumerate(ev):
        e = {"action": act, "addr": addr, "size": size, "stream": 0}
        if t0 is not None:
            e["time_us"] = t0 + 10 * i
        if extra:
            e.update(extra)
        e["frames"] = fr
        out.append(e)
    return out


def final_segments(history=False, with_frames=True):
    """Segment state matching the end of base_trace."""
    def blk(addr, size, req, state):
        b = {"address": addr, "size": size, "requested_size": req, "state": state}
        if history:
            del b["address"]
            b["history"] = [{"addr": addr, "real_size": req, "frames": FRAMES_USER}] if state != "inactive" else []
        elif with_frames:
            b["frames"] = FRAMES_USER if state != "inactive" else []
        return b
    seg_a = {"device": 0, "address": A, "total_size": 2 * MIB, "allocated_size": 512,
             "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
             "blocks": [blk(A, 1024, 0, "inactive"), blk(A + 1024, 512, 512, "active_allocated"),
                        blk(A + 1536, 2 * MIB - 1536, 0, "inactive")]}
    seg_b = {"device": 0, "address": B, "total_size": 20 * MIB, "allocated_size": 20 * MIB,
             "active_size": 20 * MIB, "requested_size": 5 * MIB + 15128640, "stream": 0,
             "segment_type": "large",
             "blocks": [blk(B, 5 * MIB, 5 * MIB, "active_allocated"),
                        blk(B + 5 * MIB, 15 * MIB, 15128640, "active_allocated")]}
    if not history:
        for s in (seg_a, seg_b):
            s["segment_pool_id"] = (0, 0)
            s["is_expandable"] = False
            s["frames"] = []
    return [seg_a, seg_b]


SETTINGS = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


def v2_0():
    return {"segments": final_segments(history=True), "device_traces": [base_trace(frames=True)]}


def v2_1():
    tr = base_trace()
    return {"segments": final_segments(), "device_traces": [tr]}


def v2_3():
    d = v2_1()
    d["device_traces"] = [base_trace(t0=1700000000000000)]
    d["allocator_settings"] = dict(SETTINGS)
    return d


def v2_5():
    d = v2_3()
    d["external_annotations"] = [
        {"stage": "START", "name": "Optimizer.step#SGD.step", "device": 0, "time_us": 1700000000000055},
        {"stage": "END", "name": "Optimizer.step#SGD.step", "device": 0, "time_us": 1700000000000056}]
    return d


def v2_8():
    d = v2_5()
    d["device_traces"] = [base_trace(t0=1700000000000000, extra={"compile_context": "N/A"})]
    return d


def v2_10():
    d = v2_5()
    d["device_traces"] = [base_trace(t0=1700000000000000,
                                     extra={"compile_context": "N/A", "user_metadata": ""})]
    return d


def newer():
    """Fields after 2.11: pool_id, dict user_metadata, internal_metadata, the
    annotate action, host_* lists, unknown keys at every level."""
    d = v2_10()
    tr = base_trace(t0=1700000000000000, extra={
        "compile_context": "N/A", "user_metadata": {"phase": "fwd"},
        "internal_metadata": {"k": 1}, "pool_id": (0, 0), "some_future_key": [1, 2.5, None]})
    tr.insert(3, {"action": "annotate", "addr": 0, "size": 0, "stream": 0,
                  "time_us": 1700000000000025, "frames": [], "name": "my region"})
    d["device_traces"] = [tr]
    d["host_segments"] = []
    d["host_traces"] = [{"action": "alloc", "addr": 1, "size": 64, "stream": 0, "frames": []}]
    d["allocator_settings"]["graph_capture_record_stream_reuse"] = False
    d["a_future_top_level_key"] = {"x": b"bytes", "y": (1, 2, 3)}
    return d


def legacy_list():
    return final_segments()


def two_devices():
    d = v2_3()
    tr1 = base_trace(t0=1700000000000000)
    d["device_traces"] = [[], tr1]  # device 0 empty, device 1 traced
    segs = final_segments()
    for s in segs:
        s["device"] = 1
    d["segments"] = segs
    return d


def interleaved():
    """Two devices whose trace entries first appear, in file order, in an
    unknown key's list: each device trace then references every other
    entry (0, 2, 4, 6 and 1, 3, 5, 7), which the loader gathers."""
    tr = base_trace()
    return {"all": tr, "device_traces": [tr[0::2], tr[1::2]], "segments": []}


def records_as_segments():
    """The device trace's list again as 'segments': refused, not read as
    an empty segment list."""
    tr = base_trace()
    return {"device_traces": [tr], "segments": tr}


def segments_as_traces():
    """The segment list again as a device trace: the segments the reader
    converted while reading are refused as trace entries."""
    segs = overflow()["segments"]
    return {"segments": segs, "device_traces": [segs]}


def aliased_traces():
    """One trace list named for three devices (memo gets of it): refused, not
    replayed (and held) once a device, as a few bytes more a device would
    have it thousands of times."""
    tr = base_trace()
    return {"segments": [], "device_traces": [tr, tr, tr]}


def blocks_as_traces():
    """Copies of the segments' blocks as a device trace (read as block
    records): refused as trace entries."""
    segs = overflow()["segments"]
    return {"segments": segs, "device_traces": [[dict(b) for b in segs[0]["blocks"]]]}


def blocks_as_segments():
    """A copy of a block in the segment list: refused as a segment."""
    segs = overflow()["segments"]
    return {"segments": segs + [dict(segs[0]["blocks"][0])], "device_traces": [[]]}


def segment_free_first():
    """A ring that begins by freeing one of two 2 MiB segments made before
    it: reserved starts at 4 MiB, its peak, and never stands there again
    after an event (the first event at peak reserved: none)."""
    S = A
    tr = [{"action": "segment_free", "addr": S + 2 * MIB, "size": 2 * MIB, "stream": 0,
           "frames": []},
          {"action": "alloc", "addr": S, "size": 4096, "stream": 0, "frames": []}]
    segs = [{"device": 0, "address": S, "total_size": 2 * MIB, "allocated_size": 4096,
             "active_size": 4096, "requested_size": 4096, "stream": 0, "segment_type": "small",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": S, "size": 4096, "requested_size": 4096,
                         "state": "active_allocated", "frames": []},
                        {"address": S + 4096, "size": 2 * MIB - 4096, "requested_size": 0,
                         "state": "inactive", "frames": []}]}]
    return {"segments": segs, "device_traces": [tr]}


def overflow():
    """Ring buffer kept only the tail: the trace starts with the free of a
    2000-byte block (block 2048) allocated before recording; the final
    state holds a 4096-byte block no recorded alloc explains. Initial
    allocated 2048 + 4096 = 6144, after the free 4096, reserved 2 MiB."""
    S = A
    tr = [{"action": "free_requested", "addr": S, "size": 2000, "stream": 0, "frames": []},
          {"action": "free_completed", "addr": S, "size": 2000, "stream": 0, "frames": []}]
    segs = [{"device": 0, "address": S, "total_size": 2 * MIB, "allocated_size": 4096,
             "active_size": 4096, "requested_size": 4096, "stream": 0, "segment_type": "small",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": S, "size": 2048, "requested_size": 0, "state": "inactive", "frames": []},
                        {"address": S + 2048, "size": 4096, "requested_size": 4096,
                         "state": "active_allocated", "frames": FRAMES_USER},
                        {"address": S + 6144, "size": 2 * MIB - 6144, "requested_size": 0,
                         "state": "inactive", "frames": []}]}]
    return {"segments": segs, "device_traces": [tr]}


def expandable():
    """expandable_segments: pages mapped at the end of one reservation.
    map 2 MiB, alloc 1.5 MiB (block 1572864, split since remainder >= 512),
    map 2 MiB more, alloc 2 MiB at the end of the first (fits the merged free
    range), free the first, unmap nothing. allocated peak 1572864 + 2097152."""
    E = 0x7F8000000000
    tr = [{"action": "segment_map", "addr": E, "size": 2 * MIB, "stream": 0, "frames": []},
          {"action": "alloc", "addr": E, "size": 1572864, "stream": 0, "frames": []},
          {"action": "segment_map", "addr": E + 2 * MIB, "size": 2 * MIB, "stream": 0, "frames": []},
          {"action": "alloc", "addr": E + 1572864, "size": 2 * MIB, "stream": 0, "frames": []},
          {"action": "free_requested", "addr": E, "size": 1572864, "stream": 0, "frames": []},
          {"action": "free_completed", "addr": E, "size": 1572864, "stream": 0, "frames": []},
          {"action": "segment_unmap", "addr": E, "size": 1572864 - 524288, "stream": 0, "frames": []}]
    st = dict(SETTINGS)
    st["expandable_segments"] = True
    st["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return {"segments": [], "device_traces": [tr], "allocator_settings": st}


def unmap_segment(blocks):
    """The one expandable segment of unmap_remap's end: 6 MiB at 0x7F8000000000."""
    E = 0x7F8000000000
    fr = {"filename": "train.py", "line": 5, "name": "step"}
    bl, at = [], E
    for size in blocks:
        bl.append({"address": at, "size": size, "requested_size": size,
                   "state": "active_allocated", "frames": [fr]})
        at += size
    return [{"device": 0, "address": E, "total_size": 6 * MIB, "allocated_size": 6 * MIB,
             "active_size": 6 * MIB, "requested_size": 6 * MIB, "stream": 0,
             "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": True,
             "frames": [], "blocks": bl}]


def unmap_remap(window=False):
    """Pages of an expandable segment unmapped inside a free block and mapped
    again there (what empty_cache() and a later allocation do): map 6 MiB;
    a = 1 MiB, b = 4 MiB, c = 1 MiB fill it; free b; unmap its middle 2 MiB
    (free 1 MiB each side of the hole: reserved 4 MiB); map them again
    (reserved 6 MiB; the three free MiB one block again); b2 = 4 MiB where b
    was. Allocated 6 MiB at the end, the state whole.
    window=True: the last two events alone (a ring's window), as torch's
    snapshot would have them: a and c allocated before it, its start's pages
    two runs (the final run less the map) that the map joins, so b2 fits."""
    E = 0x7F8000000000
    ev = lambda a, addr, size: {"action": a, "addr": addr, "size": size, "stream": 0,
                                "frames": FRAMES_USER}
    tr = [ev("segment_map", E, 6 * MIB), ev("alloc", E, MIB), ev("alloc", E + MIB, 4 * MIB),
          ev("alloc", E + 5 * MIB, MIB), ev("free_requested", E + MIB, 4 * MIB),
          ev("free_completed", E + MIB, 4 * MIB), ev("segment_unmap", E + 2 * MIB, 2 * MIB),
          ev("segment_map", E + 2 * MIB, 2 * MIB), ev("alloc", E + MIB, 4 * MIB)]
    st = dict(SETTINGS)
    st["expandable_segments"] = True
    st["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return {"segments": unmap_segment([MIB, 4 * MIB, MIB]),
            "device_traces": [tr[-2:] if window else tr], "allocator_settings": st}


def oom():
    tr = base_trace(t0=1700000000000000)
    tr.append({"action": "oom", "device_free": 123 * MIB, "size": 80 * 1024 * MIB,
               "stream": 0, "time_us": 1700000000000100, "frames": FRAMES_USER})
    d = v2_3()
    d["device_traces"] = [tr]
    return d


def memo_get(i):
    """BINGET or LONG_BINGET of memo slot i."""
    return (b"h" + bytes([i])) if i < 256 else (b"j" + struct.pack("<I", i))


class CppPickler:
    """What torch::jit::Pickler (tag_aggregates=false) writes: protocol 2,
    BINUNICODE for every string (memoized by value), explicit BINPUT after
    each memoized value, LONG1 with 8 bytes beyond int32, EMPTY_DICT MARK ..
    SETITEMS even when empty, big-endian BINFLOAT, no FRAME, no MEMOIZE."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}
        self.n = 0

    def put(self):
        if self.n < 256:
            self.out += b"q" + bytes([self.n])
        else:
            self.out += b"r" + struct.pack("<I", self.n)
        self.n += 1
        return self.n - 1

    def get(self, i):
        self.out += memo_get(i)

    def dump(self, v):
        if v is None:
            self.out += b"N"
        elif v is True or v is False:
            self.out += b"\x88" if v else b"\x89"
        elif isinstance(v, int):
            if -2**31 <= v < 2**31:
                self.out += b"J" + struct.pack("<i", v)
            else:
                self.out += b"\x8a\x08" + struct.pack("<q" if v < 0 else "<Q", v)
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if ("s", v) in self.memo:
                return self.get(self.memo[("s", v)])
            b = v.encode()
            self.out += b"X" + struct.pack("<I", len(b)) + b
            self.memo[("s", v)] = self.put()
        elif isinstance(v, tuple):
            for x in v:
                self.dump(x)
            self.out += {1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(v)]
        elif isinstance(v, list):
            self.out += b"]("
            for x in v:
                self.dump(x)
            self.out += b"e"
        elif isinstance(v, dict):
            self.out += b"}("
            for k, x in v.items():
                self.dump(k)
                self.dump(x)
            self.out += b"u"
        else:
            raise TypeError(type(v))

    def finish(self, v):
        self.dump(v)
        self.out += b"."
        return bytes(self.out)


class MemoPickler:
    """Protocol 4 the way Python writes snapshots (MEMOIZE after every string,
    dict and list; strings memoized by value here), with raw opcodes between
    values for the cases Python never writes."""

    def __init__(self):
        self.out = bytearray(b"\x80\x04")
        self.n = 0
        self.strs = {}

    def memoize(self):
        self.out += b"\x94"
        self.n += 1
        return self.n - 1

    def get(self, i):
        self.out += memo_get(i)

    def raw(self, b):
        self.out += b

    def open_dict(self):
        """EMPTY_DICT MEMOIZE MARK: a dict whose pairs follow (SETITEMS ends
        it); returns its memo slot."""
        self.out += b"}"
        i = self.memoize()
        self.out += b"("
        return i

    def close_with_room(self):
        """Ends the top dict with a 4000-byte 'note': room in the memo the
        reader sizes by the file (a record is read only where the memo need
        not grow), and bytes past the last record; the pickle's bytes."""
        self.dump("note")
        self.raw(b"X" + struct.pack("<I", 4000) + b"x" * 4000)
        self.memoize()
        self.raw(b"u.")
        return bytes(self.out)

    def open_list(self):
        """EMPTY_LIST MEMOIZE MARK: a list whose items follow (APPENDS)."""
        self.out += b"]"
        i = self.memoize()
        self.out += b"("
        return i

    def dump(self, v):
        """v: a str, int, a Memo (a get of that index), a list or a dict."""
        if isinstance(v, Memo):
            self.get(v.i)
        elif isinstance(v, str):
            if v in self.strs:
                return self.get(self.strs[v])
            b = v.encode()
            self.out += b"\x8c" + bytes([len(b)]) + b
            self.strs[v] = self.memoize()
        elif isinstance(v, int):
            self.out += b"J" + struct.pack("<i", v) if -2**31 <= v < 2**31 else b"\x8a\x08" + struct.pack("<Q", v)
        elif isinstance(v, list):
            self.out += b"]"
            self.memoize()
            if v:
                self.out += b"("
                for x in v:
                    self.dump(x)
                self.out += b"e"
        elif isinstance(v, dict):
            i = self.open_dict()
            for k, x in v.items():
                self.dump(k)
                self.dump(x)
            self.out += b"u"
            return i
        else:
            raise TypeError(type(v))


class Memo:
    def __init__(self, i):
        self.i = i


def memo_overwrite():
    """Four allocations whose frames lists are built from memo references
    to frame dicts. Entries 2 and 4 have the same list bytes (references to
    memo slots a and b), but between them slot a is overwritten (BINPUT)
    with the frame of entry 3: entry 4's stack is (f2, f1), entry 2's
    (f0, f1). Python's pickler never reuses a memo slot; the reader must
    still not take entry 4's list for entry 2's."""
    w = MemoPickler()
    w.open_dict()
    w.dump("segments")
    w.dump([])
    w.dump("device_traces")
    w.open_list()
    w.open_list()

    def frame(name, line):
        return {"name": name, "filename": "/home/u/m.py", "line": line}

    def entry(addr, frames):
        e = {"action": "alloc", "addr": addr, "size": 512, "stream": 0, "frames": frames}
        w.open_dict()
        for k, x in e.items():
            w.dump(k)
            if k == "frames":
                x()
            else:
                w.dump(x)
        w.raw(b"u")

    slots = {}

    def frames1():  # frame dicts defined inline: f0 at slot a, f1 at slot b
        w.open_list()
        slots["a"] = w.dump(frame("f0", 1))
        slots["b"] = w.dump(frame("f1", 2))
        w.raw(b"e")

    def frames_ab():  # the same bytes twice: references to slots a and b
        w.dump([Memo(slots["a"]), Memo(slots["b"])])

    def frames3():
        w.open_list()
        slots["c"] = w.dump(frame("f2", 3))
        w.raw(b"e")

    entry(A, frames1)
    entry(A + 512, frames_ab)
    entry(A + 1024, frames3)
    w.get(slots["c"])  # slot a := f2's dict, then drop it from the stack
    w.raw(b"r" + struct.pack("<I", slots["a"]) + b"0")
    entry(A + 1536, frames_ab)
    w.raw(b"ee")  # the trace, device_traces
    w.raw(b"u.")
    return bytes(w.out)


def odd_records():
    """Trace entries at the edges of the reader's record path (trace entries
    read straight from their bytes), each with the value Python's
    pickle.load gives it (test_records.c checks them):
      0  plain: empty frames list, ending the dict
      1  'device_free' then 'addr' (an OOM): the later, addr, counts
      2  'addr' then 'device_free': device_free counts
      3  'size' twice: the second (1024) counts
      4  a key written afresh, not a memo get: read as a dict
      5  pool_id a tuple (1, 2): read as a dict, a private pool
      6  stream 2**64-1 in nine LONG1 bytes, size None, addr True
      7  an unknown key whose value is the entry itself (a memo get of the
         dict being read): read as a dict
      8  frames: memo gets of a frame dict not yet converted: read as a dict
      9  the same frames list again (its frame dict converted by 8)
     10  after the memo slot of the key 'size' is overwritten with 'stream'
         (BINPUT), the same key bytes as entry 9's 'size': stream 7, no size"""
    w = MemoPickler()
    w.open_dict()
    w.dump("segments")
    w.open_list()
    seg = {"device": 0, "address": A, "total_size": 2 << 20, "allocated_size": 0,
           "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
           "blocks": [{"address": A, "size": 2 << 20, "requested_size": 0,
                       "state": "inactive", "frames": []}]}
    w.dump(seg)
    frame_slot = w.dump({"name": "train", "filename": "/home/u/train.py", "line": 7})
    w.raw(b"0e")  # the frame dict off the stack again: a memo slot only
    w.dump("device_traces")
    w.open_list()
    w.open_list()

    def entry(pairs):
        me = w.open_dict()
        for k, x in pairs:
            if callable(k):
                k()
            else:
                w.dump(k)
            if callable(x):
                x(me)
            else:
                w.dump(x)
        w.raw(b"u")

    def empty_list(me):
        w.raw(b"]")
        w.memoize()

    def raw(b):
        return lambda me: w.raw(b)

    base = [("action", "alloc"), ("stream", 0), ("time_us", 5)]
    entry(base + [("addr", A), ("size", 512), ("frames", empty_list)])
    entry([("action", "oom"), ("device_free", 4096), ("addr", A + 512), ("size", 0),
           ("frames", empty_list)])
    entry([("action", "oom"), ("addr", A + 1024), ("device_free", 8192), ("size", 0),
           ("frames", empty_list)])
    entry(base + [("addr", A + 1536), ("size", 512), ("size", 1024), ("frames", empty_list)])
    entry([(lambda: w.raw(b"\x8c\x06action"), "alloc"), ("addr", A + 4096), ("size", 512),
           ("frames", empty_list)])
    entry(base + [("addr", A + 8192), ("size", 512), ("pool_id", raw(b"K\x01K\x02\x86")),
                  ("frames", empty_list)])
    entry([("action", "alloc"), ("addr", raw(b"\x88")), ("size", raw(b"N")),
           ("stream", raw(b"\x8a\x09" + b"\xff" * 8 + b"\x00")), ("frames", empty_list)])
    entry(base + [("addr", A + 12288), ("size", 512),
                  ("x", lambda me: w.get(me)), ("frames", empty_list)])
    for addr in (A + 16384, A + 20480):
        entry(base + [("addr", addr), ("size", 512),
                      ("frames", lambda me: w.dump([Memo(frame_slot), Memo(frame_slot)]))])
    w.get(w.strs["stream"])  # slot of 'size' := 'stream', then off the stack
    w.raw(b"r" + struct.pack("<I", w.strs["size"]) + b"0")
    entry(base + [("addr", A + 24576), ("size", 7), ("frames", empty_list)])
    w.raw(b"ee")  # the trace, device_traces
    # bytes after the last entry: the record path reads an entry only with
    # 16 bytes to spare past each opcode
    w.dump("note")
    w.dump("the last entry is not at the end of the file")
    w.raw(b"u.")
    return bytes(w.out)


def distinct_stacks():
    """300 allocations with 300 different frames lists, then 50 frees whose
    lists are new list objects with the same frames as the first 50 (what
    torch writes for a repeated traceback: the same memo references in a
    list of its own). The reader stops recognising lists by their bytes
    after 256 new ones without repeats; the frees must still get the
    allocations' stacks: event 301 + k has event 1 + k's stack."""
    frames = [{"name": "f%d" % i, "filename": "/home/u/m.py", "line": i} for i in range(40)]
    stacks = [[frames[k % 40], frames[k // 40], frames[39], frames[38]] for k in range(300)]
    tr = [{"action": "segment_alloc", "addr": A, "size": 2 * MIB, "stream": 0, "frames": []}]
    for k in range(300):
        tr.append({"action": "alloc", "addr": A + 512 * k, "size": 512, "stream": 0,
                   "frames": stacks[k]})
    for k in range(50):
        tr.append({"action": "free_requested", "addr": A + 512 * k, "size": 512, "stream": 0,
                   "frames": list(stacks[k])})
    return {"segments": [], "device_traces": [tr]}


LONG_STACKS = (1, 2, 3, 400, 998, 999, 1000, 1001, 1500)


def long_stacks():
    """Frames lists past the reader's fused run (999 gets) and around it,
    read where it no longer looks lists up by their bytes: one list
    defining 1600 frame dicts (memo slots past 255, so the rest get them
    with LONG_BINGET), 260 short distinct lists, then event 262 + k with
    frames f0 .. f(n-1), n = LONG_STACKS[k], innermost first; a list over
    1000 items is two APPENDS batches (Python's pickler)."""
    frames = [{"name": "f%d" % i, "filename": "/home/u/m.py", "line": i} for i in range(1600)]
    tr = [{"action": "segment_alloc", "addr": A, "size": 2 * MIB, "stream": 0, "frames": []},
          {"action": "alloc", "addr": A + 512 * 300, "size": 512, "stream": 0,
           "frames": frames[::-1]}]
    for k in range(260):
        tr.append({"action": "alloc", "addr": A + 512 * k, "size": 512, "stream": 0,
                   "frames": [frames[1599 - k % 40], frames[1599 - k // 40 - 40]]})
    for k, n in enumerate(LONG_STACKS):
        tr.append({"action": "alloc", "addr": A + 512 * (260 + k), "size": 512, "stream": 0,
                   "frames": frames[:n]})
    return {"segments": [], "device_traces": [tr]}


LIST_SEQUENCE = "ABACADABAC"
LIST_FRAMES = {"A": (0, 1), "B": (2, 3), "C": (2, 3, 4), "D": (2, 5)}


def list_sequence():
    """Frames lists in a sequence that repeats and then strays (LIST_SEQUENCE,
    each a new list over the same frame dicts, so the same bytes): the reader
    guesses each list from the one that followed the previous list before,
    and must reject a wrong guess. B's bytes are the start of C's (only the
    byte after them tells), D shares its first frame with B and C. Event
    1 + k has the frames of LIST_FRAMES[LIST_SEQUENCE[k]], innermost first."""
    frames = [{"name": "f%d" % i, "filename": "/home/u/m.py", "line": i} for i in range(6)]
    tr = [{"action": "segment_alloc", "addr": A, "size": 2 * MIB, "stream": 0, "frames": []}]
    for k, c in enumerate(LIST_SEQUENCE):
        tr.append({"action": "alloc", "addr": A + 512 * k, "size": 512, "stream": 0,
                   "frames": [frames[i] for i in LIST_FRAMES[c]]})
    return {"segments": [], "device_traces": [tr]}


def multi_device(truncated=False, high_before=False):
    """One process, two GPUs, a model split over them, optimizer annotations
    on cuda:0 only (torch tags them with the current device). Per step at
    t (us): cuda:0's forward (4 MiB) at t, cuda:1's (3 MiB) at t+5; the
    backward starts on cuda:1 (a 1 MiB gradient at t+8, frames-less as
    torch's autograd thread), then cuda:0 (2 MiB at t+10); optimizer step
    [t+20, t+30]; zero_grad [t+40, t+44] frees the gradients. 2 MiB of
    parameters on each device. cuda:1 then reads, each step: before the
    forward 2, after it 5 (the backward began on cuda:1), after backward 3,
    after the step 3, after zero_grad 2 MiB. truncated: cuda:1's history
    begins at step 2's forward (its ring buffer overflowed), so only step 3
    is whole there. high_before: step 2's gradient on cuda:1 is 2 MiB, so
    its end, before the history's first whole step, holds a peak (7 MiB)
    no later moment reaches."""
    t0, bases = 1700000000000000, {0: A, 1: B}
    tr = {0: [], 1: []}

    def ev(dev, t, act, off, size, frames):
        tr[dev].append({"action": act, "addr": bases[dev] + off, "size": size, "stream": 0,
                        "time_us": t0 + t, "frames": frames})

    def free(dev, t, off, size):
        ev(dev, t, "free_requested", off, size, [])
        ev(dev, t, "free_completed", off, size, [])
    build = [{"name": "main", "filename": "/home/u/train.py", "line": 5}]
    for dev in (0, 1):
        ev(dev, dev, "segment_alloc", 0, 20 * MIB, [])
        ev(dev, 2 + dev, "alloc", 0, 2 * MIB, build)
    anns = []
    for k in range(4):
        t = 1000 * (k + 1)
        ev(0, t, "alloc", 2 * MIB, 4 * MIB, FRAMES_USER)
        ev(1, t + 5, "alloc", 2 * MIB, 3 * MIB, FRAMES_USER)
        grad = 2 * MIB if high_before and k == 2 else MIB
        ev(1, t + 8, "alloc", 5 * MIB, grad, [])
        free(1, t + 9, 2 * MIB, 3 * MIB)
        ev(0, t + 10, "alloc", 6 * MIB, 2 * MIB, [])
        free(0, t + 11, 2 * MIB, 4 * MIB)
        free(0, t + 42, 6 * MIB, 2 * MIB)
        free(1, t + 43, 5 * MIB, grad)
        for name, a, b in (("Optimizer.step#SGD.step", 20, 30),
                           ("Optimizer.zero_grad#SGD.zero_grad", 40, 44)):
            anns += [{"stage": "START", "name": name, "device": 0, "time_us": t0 + t + a},
                     {"stage": "END", "name": name, "device": 0, "time_us": t0 + t + b}]
    for dev in (0, 1):
        tr[dev].sort(key=lambda e: e["time_us"])
    if truncated:
        tr[1] = [e for e in tr[1] if e["time_us"] >= t0 + 3000]

    def seg(dev):
        return {"device": dev, "address": bases[dev], "total_size": 20 * MIB,
                "allocated_size": 2 * MIB, "active_size": 2 * MIB, "requested_size": 2 * MIB,
                "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                "is_expandable": False, "frames": [],
                "blocks": [{"address": bases[dev], "size": 2 * MIB, "requested_size": 2 * MIB,
                            "state": "active_allocated", "frames": build},
                           {"address": bases[dev] + 2 * MIB, "size": 18 * MIB,
                            "requested_size": 0, "state": "inactive", "frames": []}]}
    return {"segments": [seg(0), seg(1)], "device_traces": [tr[0], tr[1]],
            "allocator_settings": dict(SETTINGS), "external_annotations": anns}


class FirstFit:
    """Addresses as torch's large pool would hand them out of one segment
    (first fit, split; a freed block merges with free neighbours), so a
    made-up trace replays without anomalies. Sizes are 2 MiB multiples:
    every remainder is split off."""

    def __init__(self, base, size):
        self.blocks = [[base, size, None]]  # address, size, requested (None: free)

    def alloc(self, size):
        for i, (addr, bsize, req) in enumerate(self.blocks):
            if req is None and bsize >= size:
                self.blocks[i] = [addr, size, size]
                if bsize > size:
                    self.blocks.insert(i + 1, [addr + size, bsize - size, None])
                return addr
        raise ValueError("segment full")

    def free(self, addr):
        i = next(k for k, b in enumerate(self.blocks) if b[0] == addr)
        self.blocks[i][2] = None
        for j in (i + 1, i):  # merge with the next, then the previous free block
            if 0 < j < len(self.blocks) and self.blocks[j][2] is None and self.blocks[j - 1][2] is None:
                self.blocks[j - 1][1] += self.blocks[j][1]
                del self.blocks[j]


def optimizers_in_turn():
    """Two optimizers stepping in turn (a GAN), beginning with the second's
    step (recording began mid-iteration: the first group is cut short):
    G, D, G, D, G, D, G, D, G, nine annotated steps. Each step: a 4 MiB
    forward activation, a 2 MiB gradient (autograd thread, no frames) kept
    to zero_grad, a 2 MiB temporary inside the optimizer step called from
    /home/u/gan.py:40 (D) or :50 (G), except step 5 (a G step that
    allocates nothing: its site unknown). A D step keeps 4 MiB until the
    next G step frees it; a G step keeps 2 MiB for good. Per step the
    memory after zero_grad goes +4, -2, +4, -2...: no leak step to step;
    per iteration (D then G) +2 MiB: a leak of 2 MiB an iteration, 4
    iterations."""
    t0, seg = 1700000000000000, FirstFit(B, 160 * MIB)
    tr, anns, held = [], [], None
    opt = [{"name": "_multi_tensor_adam", "filename": "/venv/lib/python3.12/site-packages/torch/optim/adam.py", "line": 600}]

    def ev(t, act, addr, size, frames):
        tr.append({"action": act, "addr": addr, "size": size, "stream": 0, "time_us": t0 + t,
                   "frames": frames})

    def alloc(t, size, frames):
        addr = seg.alloc(size)
        ev(t, "alloc", addr, size, frames)
        return addr

    def free(t, addr, size):
        ev(t, "free_requested", addr, size, [])
        ev(t, "free_completed", addr, size, [])
        seg.free(addr)
    ev(0, "segment_alloc", B, 160 * MIB, [])
    for j in range(9):
        t, d_step = 1000 * (j + 1), j % 2 == 1
        act = alloc(t + 5, 4 * MIB, FRAMES_USER)
        grad = alloc(t + 10, 2 * MIB, [])
        free(t + 11, act, 4 * MIB)
        if j != 5:
            site = {"name": "train", "filename": "/home/u/gan.py", "line": 40 if d_step else 50}
            free(t + 25, alloc(t + 22, 2 * MIB, opt + [site]), 2 * MIB)
        if d_step:
            held = alloc(t + 35, 4 * MIB, FRAMES_USER[2:])
        else:
            if held is not None:
                free(t + 35, held, 4 * MIB)
                held = None
            alloc(t + 36, 2 * MIB, FRAMES_USER[2:])
        free(t + 42, grad, 2 * MIB)
        for name, a, b in (("Optimizer.step#Adam.step", 20, 30),
                           ("Optimizer.zero_grad#Adam.zero_grad", 40, 44)):
            anns += [{"stage": "START", "name": name, "device": 0, "time_us": t0 + t + a},
                     {"stage": "END", "name": name, "device": 0, "time_us": t0 + t + b}]
    blocks = [{"address": a, "size": n, "requested_size": r or 0,
               "state": "inactive" if r is None else "active_allocated",
               "frames": [] if r is None else FRAMES_USER[2:]} for a, n, r in seg.blocks]
    used = sum(b["size"] for b in blocks if b["state"] != "inactive")
    segment = {"device": 0, "address": B, "total_size": 160 * MIB, "allocated_size": used,
               "active_size": used, "requested_size": used, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
               "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [tr], "allocator_settings": dict(SETTINGS),
            "external_annotations": anns}


def calls():
    """An inference loop, no optimizer: five calls of /home/u/infer.py:20
    (into an installed package's model code), each after an input made at
    :18; a call allocates a 4 MiB temporary (freed in the call, with one
    C++-only allocation between, which does not end it) and keeps 2 MiB.
    Memory between calls grows by 2 MiB a call: four calls compared (the
    last has no next), a leak of 2 MiB a call."""
    t0, seg = 1700000000000000, FirstFit(B, 64 * MIB)
    tr = []
    model = [{"name": "forward", "filename": "/venv/lib/python3.12/site-packages/tf/model.py", "line": 7},
             {"name": "main", "filename": "/home/u/infer.py", "line": 20}]
    inputs = [{"name": "main", "filename": "/home/u/infer.py", "line": 18}]

    def alloc(t, size, frames):
        addr = seg.alloc(size)
        tr.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                   "time_us": t0 + t, "frames": frames})
        return addr

    def free(t, addr, size):
        for act in ("free_requested", "free_completed"):
            tr.append({"action": act, "addr": addr, "size": size, "stream": 0,
                       "time_us": t0 + t, "frames": []})
        seg.free(addr)
    tr.append({"action": "segment_alloc", "addr": B, "size": 64 * MIB, "stream": 0,
               "time_us": t0, "frames": []})
    for k in range(5):
        t = 1000 * (k + 1)
        ids = alloc(t, 2 * MIB, inputs)
        tmp = alloc(t + 10, 4 * MIB, model)
        cxx = alloc(t + 11, 2 * MIB, [])
        free(t + 12, cxx, 2 * MIB)
        alloc(t + 13, 2 * MIB, model)  # kept
        free(t + 14, tmp, 4 * MIB)
        free(t + 15, ids, 2 * MIB)
    blocks = [{"address": a, "size": n, "requested_size": r or 0,
               "state": "inactive" if r is None else "active_allocated",
               "frames": [] if r is None else model} for a, n, r in seg.blocks]
    used = sum(b["size"] for b in blocks if b["state"] != "inactive")
    segment = {"device": 0, "address": B, "total_size": 64 * MIB, "allocated_size": used,
               "active_size": used, "requested_size": used, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
               "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [tr], "allocator_settings": dict(SETTINGS)}


def small_leaks():
    """Eight annotated steps, each a 4 MiB forward activation and a 2 MiB
    gradient (autograd thread, no frames) freed by zero_grad; after it,
    /home/u/train.py:60 keeps 16 KiB every step and :70 keeps 16 KiB every
    step but the fourth (small pool, segment A). Memory after zero_grad
    grows 16-32 KiB a step, under the totals' 1 MiB noise: only :60 keeps
    something from every step of the kept range (steps 1 to 6), so the
    small leak is 16 KiB a step, at :60 alone."""
    t0, big, small = 1700000000000000, FirstFit(B, 64 * MIB), FirstFit(A, 2 * MIB)
    tr, anns = [], []

    def ev(t, act, addr, size, frames):
        tr.append({"action": act, "addr": addr, "size": size, "stream": 0, "time_us": t0 + t,
                   "frames": frames})

    def alloc(seg, t, size, frames):
        addr = seg.alloc(size)
        ev(t, "alloc", addr, size, frames)
        return addr

    def free(seg, t, addr, size):
        ev(t, "free_requested", addr, size, [])
        ev(t, "free_completed", addr, size, [])
        seg.free(addr)
    ev(0, "segment_alloc", B, 64 * MIB, [])
    ev(1, "segment_alloc", A, 2 * MIB, [])
    for j in range(8):
        t = 1000 * (j + 1)
        act = alloc(big, t + 5, 4 * MIB, FRAMES_USER)
        grad = alloc(big, t + 10, 2 * MIB, [])
        free(big, t + 11, act, 4 * MIB)
        free(big, t + 42, grad, 2 * MIB)
        alloc(small, t + 45, 16 << 10, [{"name": "train", "filename": "/home/u/train.py", "line": 60}])
        if j != 3:
            alloc(small, t + 46, 16 << 10, [{"name": "train", "filename": "/home/u/train.py", "line": 70}])
        for name, a, b in (("Optimizer.step#AdamW.step", 20, 30),
                           ("Optimizer.zero_grad#AdamW.zero_grad", 40, 44)):
            anns += [{"stage": "START", "name": name, "device": 0, "time_us": t0 + t + a},
                     {"stage": "END", "name": name, "device": 0, "time_us": t0 + t + b}]
    segments = []
    for base, seg, size, kind in ((B, big, 64 * MIB, "large"), (A, small, 2 * MIB, "small")):
        blocks = [{"address": a, "size": n, "requested_size": r or 0,
                   "state": "inactive" if r is None else "active_allocated", "frames": []}
                  for a, n, r in seg.blocks]
        used = sum(b["size"] for b in blocks if b["state"] != "inactive")
        segments.append({"device": 0, "address": base, "total_size": size, "allocated_size": used,
                         "active_size": used, "requested_size": used, "stream": 0,
                         "segment_type": kind, "segment_pool_id": (0, 0), "is_expandable": False,
                         "frames": [], "blocks": blocks})
    return {"segments": segments, "device_traces": [tr], "allocator_settings": dict(SETTINGS),
            "external_annotations": anns}


def hostile_names():
    """Frame names and files written to break out of a page or a folded
    line: the HTML report and the flame graph must show them as text."""
    d = v2_5()
    evil = [{"name": "</script><script>alert(1)</script>", "filename": "/home/u/<img src=x onerror=alert(2)>,\"x\".py",
             "line": 7},
            {"name": "a;b\nc & \"d\" 'e'", "filename": "/home/u/train.py", "line": 40}]
    for e in d["device_traces"][0]:
        e["frames"] = evil
    return d


def odd_blocks():
    """Segments whose blocks stray from torch's, for the reader's record
    path for blocks (blocks read straight from their bytes; test_records.c
    checks what each segment gets, and that the general path agrees):
      S0  b0 (keys written afresh: a dict), b1 (frames written inline: a
          dict); b2, b5, b6 and the stray one are records
      S1  b2, b3 (address a string: a dict, laid at the cursor), b4 (its
          state a string written afresh: a dict)
      S2  a memo get of b0 (b0 again, at its own address), b5 (b4's state,
          got: a record)
      S3  b6, a memo get of b6 (two copies)
      S4  a torch 2.0 block (history, no address: a dict at the cursor)
      S5  S3's blocks list again (taken with S3: empty, not a copy)
      S6  a memo get of b2 alone (a run of one record: b2 again)
    and a block-like dict outside any segment (in 'extra', skipped)."""
    w = MemoPickler()
    w.open_dict()
    w.dump("segments")
    w.open_list()
    slots = {}

    def block(name, addr, size, state="active_allocated", frames=None):
        me = w.open_dict()
        for k, x in (("address", addr), ("size", size), ("requested_size", size - 8),
                     ("state", state)):
            w.dump(k)
            w.dump(x)
        w.dump("frames")
        if frames is None:
            w.raw(b"]")
            w.memoize()
        else:
            w.dump(frames)
        w.raw(b"u")
        slots[name] = me

    def segment(k, blocks):
        """blocks: a callable writing the list, or a list of callables
        writing its items."""
        w.open_dict()
        for key, x in (("device", 0), ("address", A + k * (4 << 20)), ("total_size", 4 << 20),
                       ("allocated_size", 0), ("active_size", 0), ("requested_size", 0),
                       ("stream", 0), ("segment_type", "large")):
            w.dump(key)
            w.dump(x)
        w.dump("blocks")
        if callable(blocks):
            blocks()
        else:
            slots["list%d" % k] = w.open_list()
            for b in blocks:
                b()
            w.raw(b"e")
        w.raw(b"u")

    frame = {"name": "train", "filename": "/home/u/train.py", "line": 7}
    S = [A + k * (4 << 20) for k in range(7)]
    segment(0, [lambda: block("b0", S[0], 1 << 20),
                lambda: block("b1", S[0] + (1 << 20), 2 << 20, frames=[frame])])
    segment(1, [lambda: block("b2", S[1], 512),
                lambda: block("b3", "large", 1024, state="inactive"),
                lambda: block("b4", S[1] + 4096, 2048, state="active_pending_free")])
    segment(2, [lambda: w.get(slots["b0"]),
                lambda: block("b5", S[2] + 8192, 4096, state="active_pending_free")])
    segment(3, [lambda: block("b6", S[3], 3 << 20), lambda: w.get(slots["b6"])])

    def v2_0_block():
        w.open_dict()
        for k, x in (("size", 6144), ("state", "active_allocated")):
            w.dump(k)
            w.dump(x)
        w.dump("history")
        w.dump([{"addr": S[4], "real_size": 6000, "frames": []}])
        w.raw(b"u")
    segment(4, [v2_0_block])
    segment(5, lambda: w.get(slots["list3"]))
    segment(6, [lambda: w.get(slots["b2"])])
    w.raw(b"e")  # the segments list
    w.dump("device_traces")
    w.dump([[]])
    w.dump("extra")
    w.open_list()
    block("stray", A, 512)
    w.raw(b"e")
    return w.close_with_room()


# nested_blocks(): the segments' blocks, by segment (sizes in order)
NESTED_SIZES = [[MIB, 2 * MIB], [MIB, 2 * MIB, 4 * MIB], [MIB], [4096] * 1501, [MIB, MIB],
                [MIB, MIB], [MIB, MIB, 6144]]


def nested_blocks():
    """Segments read whole with their blocks, a segment a record whose
    'blocks' is a list of records (rec_nested in src/pickle/pickle.c), and
    where that path stops part way (test_records.c checks each segment's
    blocks, and that the general path agrees):
      N0  keys written afresh: a dict (its second block a record)
      N1  as torch writes it: a pool-id pair written afresh, 'frames' empty
          before 'blocks', three blocks in one batch
      N2  one block and APPEND (no MARK)
      N3  batches of 1000 and 500 blocks, then one by APPEND (through the
          reader's 32 KB window, it stops where the window ends)
      N4  'blocks' before 'frames', as torch's OOM dumps write them
      N5  a float after 'blocks': it stops there, the list read
      N6  a torch 2.0 block third in its batch: it stops inside the batch
    and in 'extra', outside 'segments': a segment without 'total_size'
    (the hook declines it: it stops at SETITEMS, its blocks laid nowhere),
    and a block-like dict whose list holds a block, then a segment with no
    blocks (a reference off the run: it stops there; that segment is
    taken, as the general path takes it)."""
    w = MemoPickler()
    w.open_dict()
    w.dump("segments")
    w.open_list()

    def block(addr, size):
        w.open_dict()
        for k, x in (("address", addr), ("size", size), ("requested_size", size - 8),
                     ("state", "active_allocated")):
            w.dump(k)
            w.dump(x)
        w.dump("frames")
        w.raw(b"]")
        w.memoize()
        w.raw(b"u")

    def v2_0_block(size):
        w.open_dict()
        for k, x in (("size", size), ("state", "active_allocated")):
            w.dump(k)
            w.dump(x)
        w.dump("history")
        w.dump([{"real_size": size - 8, "frames": []}])
        w.raw(b"u")

    def batch(base, sizes, off=0, last=None):
        w.raw(b"(")
        for size in sizes:
            if size == last:
                v2_0_block(size)
            else:
                block(base + off, size)
            off += size
        w.raw(b"e")
        return off

    def empty_list():
        w.raw(b"]")
        w.memoize()

    def segment(base, body, total=True, frames_first=True, tail=None):
        w.open_dict()
        for key, x in (("device", 0), ("address", base), ("total_size", 64 * MIB),
                       ("allocated_size", 0), ("active_size", 0), ("requested_size", 0),
                       ("stream", 0), ("segment_type", "large")):
            if key != "total_size" or total:
                w.dump(key)
                w.dump(x)
        w.dump("segment_pool_id")
        w.raw(b"K\x00K\x00\x86")
        w.memoize()
        w.dump("is_expandable")
        w.raw(b"\x89")
        if frames_first:
            w.dump("frames")
            empty_list()
        w.dump("blocks")
        empty_list()
        body()
        if not frames_first:
            w.dump("frames")
            empty_list()
        if tail:
            tail()
        w.raw(b"u")

    S = [A + k * 64 * MIB for k in range(10)]
    sz = NESTED_SIZES

    def n3():
        off = batch(S[3], sz[3][:1000])
        off = batch(S[3], sz[3][1000:1500], off)
        block(S[3] + off, 4096)
        w.raw(b"a")

    def note():
        w.dump("note")
        w.raw(b"G" + struct.pack(">d", 1.5))

    segment(S[0], lambda: batch(S[0], sz[0]))
    segment(S[1], lambda: batch(S[1], sz[1]))
    segment(S[2], lambda: (block(S[2], MIB), w.raw(b"a")))
    segment(S[3], n3)
    segment(S[4], lambda: batch(S[4], sz[4]), frames_first=False)
    segment(S[5], lambda: batch(S[5], sz[5]), tail=note)
    segment(S[6], lambda: batch(S[6], sz[6], last=6144))
    w.raw(b"e")  # the segments list
    w.dump("device_traces")
    w.dump([[]])
    w.dump("extra")
    w.open_list()
    segment(S[7], lambda: batch(S[7], [MIB]), total=False)
    segment(S[8], lambda: (w.raw(b"("), block(S[8], MIB),
                           segment(S[9], lambda: None, frames_first=False), w.raw(b"e")),
            total=False)
    w.raw(b"e")
    return w.close_with_room()


def split_hole():
    """A two-device trace whose second device's entries name a frames list
    written first late in the first device's (the same list object: a
    memo get of it): where the read splits in two inside the first
    device's trace (md_load_opts.split), that list is the second reader's,
    which the first does not have: the read is made again whole. 6000
    entries, so the pickle has frames to split at."""
    frames = [dict(f) for f in FRAMES_USER]
    late = [frames[2], frames[0]]
    dev0 = []
    for i in range(3000):
        addr = A + 512 * (i % 64)
        fr = late if i >= 2000 else [frames[i % 3], frames[(i + 1) % 3]]
        dev0.append({"action": "alloc", "addr": addr, "size": 512, "stream": 0,
                     "time_us": 1000 + 2 * i, "frames": fr})
        dev0.append({"action": "free_completed", "addr": addr, "size": 512, "stream": 0,
                     "time_us": 1001 + 2 * i, "frames": fr})
    dev1 = [{"action": "alloc", "addr": B + 512 * i, "size": 512, "stream": 0,
             "time_us": 9000 + i, "frames": late} for i in range(8)]
    return {"segments": [], "device_traces": [dev0, dev1]}


def split_small():
    """A trace of 2200 entries (three batches of a list: a read splits at a
    batch's start) small enough for the fuzzer (under 64 KiB), its pickle
    cut into 1 KiB frames (reframe.py) so a read can split in it
    (md_load_opts.split): frames lists made before and after the places it
    splits at, frames got from before them inside lists made after, and a
    second device after the first's trace."""
    frames = [dict(f) for f in FRAMES_USER] + [
        {"name": "step", "filename": "/venv/lib/python3.12/site-packages/torch/optim/adamw.py",
         "line": 200 + i} for i in range(6)]
    dev0, lists = [], []
    for i in range(2200):
        if i % 50 == 0:
            lists.append([frames[(i // 50 + k) % len(frames)] for k in range(1 + i % 4)])
        fr = lists[(i * 7) % len(lists)]
        act = "alloc" if i % 2 == 0 else "free_completed"
        dev0.append({"action": act, "addr": 512 * (i // 2 % 64), "size": 512, "frames": fr})
    dev1 = [{"action": "alloc", "addr": B + 512 * i, "size": 512, "stream": 0,
             "frames": [frames[i]]} for i in range(4)]
    data = pickle.dumps({"segments": [], "device_traces": [dev0, dev1]}, protocol=4)
    return reframe.reframe(data, 1024)


def long_strings():
    """Frames whose file and function names are longer than the room a
    reader parsing read-ahead chunks in place keeps before each (4 KiB,
    MD_INPUT_LEND_PAD) and than a chunk (128 KiB), the longer first (so more
    than that room of it is left when a chunk ends): written gzipped, so the
    file is read ahead whatever its size, and each name spans chunks."""
    long_frames = [
        {"filename": "/home/u/" + "f" * 150000 + ".py", "name": "step_" + "n" * 70000, "line": 7},
        {"name": "train", "filename": "/home/u/train.py", "line": 40},
    ]
    tr = base_trace(t0=1700000000000000)
    for i in range(400):  # records between the names, so chunk edges fall anywhere
        fr = long_frames if i % 50 == 0 else FRAMES_USER
        for k, act in enumerate(("alloc", "free_requested", "free_completed")):
            tr.append({"action": act, "addr": A + 1536, "size": 512, "stream": 0,
                       "time_us": 1700000001000000 + 10 * (3 * i + k), "frames": fr})
    return {"segments": final_segments(), "device_traces": [tr]}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/synthetic"
    os.makedirs(out, exist_ok=True)
    files = {
        "v2_0.pickle": (v2_0(), 2), "v2_1.pickle": (v2_1(), 4), "v2_3.pickle": (v2_3(), 4),
        "v2_5.pickle": (v2_5(), 4), "v2_8.pickle": (v2_8(), 4), "v2_10.pickle": (v2_10(), 4),
        "newer.pickle": (newer(), 5), "legacy_list.pickle": (legacy_list(), 4),
        "two_devices.pickle": (two_devices(), 4), "overflow.pickle": (overflow(), 4),
        "expandable.pickle": (expandable(), 4), "oom.pickle": (oom(), 4),
        "unmap_remap.pickle": (unmap_remap(), 4),
        "unmap_remap_window.pickle": (unmap_remap(window=True), 4),
        "interleaved.pickle": (interleaved(), 4), "distinct_stacks.pickle": (distinct_stacks(), 4),
        "list_sequence.pickle": (list_sequence(), 4), "long_stacks.pickle": (long_stacks(), 4),
        "multi_device.pickle": (multi_device(), 4),
        "multi_device_truncated.pickle": (multi_device(truncated=True), 4),
        "multi_device_truncated_high.pickle": (multi_device(truncated=True, high_before=True), 4),
        "hostile_names.pickle": (hostile_names(), 4),
        "optimizers_in_turn.pickle": (optimizers_in_turn(), 4),
        "calls.pickle": (calls(), 4),
        "small_leaks.pickle": (small_leaks(), 4),
        "split_hole.pickle": (split_hole(), 4),
        "records_as_segments.refused": (records_as_segments(), 4),  # not *.pickle: an error case
        "segments_as_traces.refused": (segments_as_traces(), 4),
        "blocks_as_traces.refused": (blocks_as_traces(), 4),
        "aliased_traces.refused": (aliased_traces(), 4),
        "segment_free_first.pickle": (segment_free_first(), 4),
        "blocks_as_segments.refused": (blocks_as_segments(), 4),
        "proto0.pickle": (v2_3(), 0), "proto1.pickle": (v2_3(), 1),
        "proto2.pickle": (v2_3(), 2), "proto3.pickle": (v2_3(), 3), "proto5.pickle": (v2_3(), 5),
    }
    for name, (obj, proto) in files.items():
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(obj, f, protocol=proto)
    with open(os.path.join(out, "cpp_pickler.pickle"), "wb") as f:
        f.write(CppPickler().finish(v2_3()))
    with open(os.path.join(out, "memo_overwrite.pickle"), "wb") as f:
        f.write(memo_overwrite())
    with open(os.path.join(out, "odd_records.pickle"), "wb") as f:
        f.write(odd_records())
    with open(os.path.join(out, "odd_blocks.pickle"), "wb") as f:
        f.write(odd_blocks())
    with open(os.path.join(out, "nested_blocks.pickle"), "wb") as f:
        f.write(nested_blocks())
    with open(os.path.join(out, "split_small.pickle"), "wb") as f:
        f.write(split_small())
    with open(os.path.join(out, "long_strings.pickle.gz"), "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            pickle.dump(long_strings(), f, protocol=4)


if __name__ == "__main__":
    main()
