#!/usr/bin/env python3
"""reframe.py IN OUT [BYTES]: a protocol 4+ pickle with its FRAMEs every
BYTES (default 4096) instead of every 64 KiB, the opcodes unchanged: a
small snapshot then has places a read can split at (md_load_opts.split),
for the fuzzer's corpus and the split tests. Reads a pickle cut short too
(up to its last whole opcode)."""
import pickletools
import struct
import sys


def reframe(data, size=4096):
    """data's opcodes in FRAMEs of about size bytes."""
    if data[:1] != b"\x80" or data[1] < 4:
        raise ValueError("not a protocol 4+ pickle")
    spans = []  # each opcode's [start, end), FRAMEs dropped
    prev = None
    try:
        for op, _, at in pickletools.genops(data):
            if prev is not None:
                spans.append((prev, at))
            prev = None if op.name == "FRAME" else at
            if op.name == "STOP":
                spans.append((at, at + 1))
                prev = None
    except Exception:
        pass  # cut short: the whole opcodes before the cut
    out, frame = bytearray(data[:2]), bytearray()
    for a, b in spans[1:]:  # spans[0]: PROTO, written above
        frame += data[a:b]
        if len(frame) >= size:
            out += b"\x95" + struct.pack("<Q", len(frame)) + frame
            frame = bytearray()
    if frame:
        out += b"\x95" + struct.pack("<Q", len(frame)) + frame
    return bytes(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    with open(src, "rb") as f:
        data = f.read()
    try:
        out = reframe(data, size)
    except ValueError as e:
        sys.exit("%s: %s" % (src, e))
    with open(dst, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
