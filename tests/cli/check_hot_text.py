#!/usr/bin/env python3
"""check_hot_text.py MEMDIAG: the static CLI lays the code and constants a
summary touches first (src/cli/hot.ld): a section .text.memdiag_hot, at
most ten 64 KiB windows, holding memdiag's reader, replay and analysis and
glibc's malloc and printf; a section .rodata.memdiag_hot from a 64 KiB
boundary, in a segment that does not execute; segments aligned to 64 KiB
(the kernel's fault-around windows fall the same way in every run) and
relocations packed (RELR). A build without it (the sanitizers' dynamic
builds) passes only if it is not the static CLI."""
import subprocess
import sys

HOT = ["rec_fast", "replay_run", "md_analyze_ahead", "classify", "malloc",
       "__vfprintf_internal", "cmd_summary"]


def readelf(m, opt):
    return subprocess.run(["readelf", opt, m], capture_output=True, text=True, check=True).stdout


def sections(m):
    out = {}
    for line in readelf(m, "-SW").splitlines():
        w = line.replace("[ ", "[").split()
        if len(w) > 6 and w[0].startswith("[") and w[0] != "[Nr]":
            out[w[1]] = (int(w[3], 16), int(w[5], 16), w[7] if len(w) > 7 else "")
    return out


def main():
    m = sys.argv[1]
    secs = sections(m)
    if ".text.memdiag_hot" not in secs:
        assert "INTERP" in readelf(m, "-lW"), "a static CLI without its hot section"
        print("not the static CLI: no hot section expected")
        return
    lo, size, _ = secs[".text.memdiag_hot"]
    assert 128 << 10 <= size <= 640 << 10, "hot code of %d bytes" % size
    addr = {}
    for line in subprocess.run(["nm", m], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3:
            addr.setdefault(p[2].split(".")[0], int(p[0], 16))
    outside = [f for f in HOT if not lo <= addr.get(f, -1) < lo + size]
    assert not outside, "outside the hot code: %s" % outside
    assert ".rodata.memdiag_hot" in secs, "no hot constants"
    rlo, rsize, flags = secs[".rodata.memdiag_hot"]
    assert rlo % 0x10000 == 0, "hot constants at %#x, not on a 64 KiB boundary" % rlo
    assert 8 << 10 <= rsize <= 192 << 10 and "X" not in flags, (rsize, flags)
    loads = [l.split() for l in readelf(m, "-lW").splitlines() if l.split()[:1] == ["LOAD"]]
    assert loads and all(int(l[-1], 16) == 0x10000 for l in loads), "segments not 64 KiB-aligned"
    assert ".relr.dyn" in secs and secs.get(".rela.dyn", (0, 0))[1] < 4096, "relocations not packed"


if __name__ == "__main__":
    main()
