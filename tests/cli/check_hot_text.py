#!/usr/bin/env python3
"""check_hot_text.py MEMDIAG: the static CLI lays the code a summary runs
first (src/cli/hot.ld): a section .text.memdiag_hot, at most ten 64 KiB
windows, holding memdiag's reader, replay and analysis and glibc's malloc
and printf. A build without it (the sanitizers' dynamic builds) passes
only if it is not the static CLI."""
import subprocess
import sys

HOT = ["rec_fast", "md_replay_run_with", "md_analyze", "md_stack_tags", "malloc",
       "__vfprintf_internal", "cmd_summary"]


def main():
    m = sys.argv[1]
    sections = subprocess.run(["readelf", "-SW", m], capture_output=True, text=True,
                              check=True).stdout
    hot = None
    for line in sections.splitlines():
        w = line.replace("[ ", "[").split()
        if len(w) > 5 and w[1] == ".text.memdiag_hot":
            hot = (int(w[3], 16), int(w[5], 16))
    if hot is None:
        dyn = subprocess.run(["readelf", "-lW", m], capture_output=True, text=True).stdout
        assert "INTERP" in dyn, "a static CLI without its hot section"
        print("not the static CLI: no hot section expected")
        return
    lo, size = hot
    assert 128 << 10 <= size <= 640 << 10, "hot section of %d bytes" % size
    addr = {}
    for line in subprocess.run(["nm", m], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3:
            addr.setdefault(p[2].split(".")[0], int(p[0], 16))
    outside = [f for f in HOT if not lo <= addr.get(f, -1) < lo + size]
    assert not outside, "outside the hot section: %s" % outside


if __name__ == "__main__":
    main()
