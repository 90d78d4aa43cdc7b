#!/usr/bin/env python3
"""hot_text.py MAP ENTRY TRACE... [--also UNITS] [--late UNITS] [--final] > hot.ld: a linker script
that lays the code and the read-only data a run touches side by side, each
at the start of its segment (.text, .rodata).

The kernel maps a file-backed page 64 KiB around each one a program faults
(fault-around), so a short run's resident text and read-only data are every
64 KiB window holding anything it touches. In memdiag's static binary a
summary of a 1 MB snapshot executes ~200 KiB of code and reads ~30 KiB of
constants, spread over 0.5 MB of text and 0.3 MB of read-only data. MAP is
the link map of a build made with -ffunction-sections -fdata-sections,
each .rodata input section in its own output section so that none shares
strings with another (`-Wl,--unique=.rodata.*,-Map=MAP`), ENTRY its entry point (hex), each TRACE the first touches
of one run under valgrind's lackey, in order: "I ADDR" (code) or "D ADDR"
(data), ADDR a run-time address, one for each 16 bytes touched. UNITS (a file) names
input sections to lay hot too, "T PATTERN" or "R PATTERN": what a run
touches that valgrind does not show (the CPU's own string function picks),
found by `hot_text.py --faults FAULTS MAP ENTRY` in runs of a build with
the hot sections; --late UNITS, the same found in runs of larger inputs
only (the helper threads' code), laid after all the rest, so that a small
input's run spans no more windows for them; --final adds the string
functions other CPUs would pick.

A unit is an input section: an archive member's (glibc, zstd...) named by
member, memdiag's own (LTO output, whose object names are temporary) by its
section name, with clone suffixes (.lto_priv.0, .constprop.0...) as a
wildcard. Units are laid by how many runs touch them, most first, then in
the order runs first touch them, so that what every run needs (startup,
malloc, the reader) fills the first windows and a command's own code
follows. For a string function glibc picks per CPU (memmove-avx2, -evex,
-avx512...), the variants a CPU of another kind would pick are laid last,
newest instruction sets first. A pattern that
matches nothing later (a renamed function, another glibc) only leaves that
code where it was."""
import bisect
import re
import sys

SECTION = re.compile(r"^ (\.(?:text|rodata)\S*)\s*(?:(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*))?$")
WRAPPED = re.compile(r"^\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*)$")
MEMBER = re.compile(r"([^/]+\.a)\(([^)]+)\)$")
CLONE = re.compile(r"\.(lto_priv|constprop|isra|part|cold)\.\d+")
VARIANT = re.compile(r"([a-z_0-9]+?)-(sse2|sse4_2|sse4_1|ssse3|avx|avx2|evex|evex512|avx512|generic|c)[-.]")
ISA_ORDER = {"evex": 0, "evex512": 1, "avx512": 1, "avx2": 2, "avx": 2, "sse4_2": 3, "sse4_1": 3, "ssse3": 3,
             "c": 3, "sse2": 4, "generic": 5}


def input_sections(path):
    """The map's .text and .rodata input sections: (address, size, name,
    file), sorted by address."""
    lines, out, i = open(path).read().split("\n"), [], 0
    while i < len(lines):
        m = SECTION.match(lines[i])
        if m:
            if m.group(2):
                addr, size, obj = m.group(2), m.group(3), m.group(4)
            else:  # a long section name: its address on the next line
                w = WRAPPED.match(lines[i + 1]) if i + 1 < len(lines) else None
                if not w:
                    i += 1
                    continue
                addr, size, obj = w.groups()
                i += 1
            if int(size, 16):
                out.append((int(addr, 16), int(size, 16), m.group(1), obj.strip()))
        i += 1
    return sorted(out)


def pattern(name, obj):
    """A linker script pattern that finds this input section in another
    link of the same code."""
    m = MEMBER.search(obj)
    if m:
        return "*%s:%s(%s)" % (m.group(1), m.group(2), name)
    if "ltrans" in obj:  # LTO output: temporary object names
        base = CLONE.sub("", name)
        if base == ".rodata":
            return "*ltrans.o(.rodata)"
        if base.startswith(".rodata.") and re.search(r"\.(str\d\.\d+|cst\d+)$", base):
            if base.count(".") <= 3:  # .rodata.str1.1: no function named
                return "*ltrans.o(%s)" % base
            base = re.sub(r"\.(str\d\.\d+|cst\d+)$", "", base)
        return "*(%s %s.*)" % (base, base)
    return "*%s(%s)" % (obj.split("/")[-1], name)


NAMED_STRINGS = re.compile(r"^\.rodata\.\S+\.str\d")
TEXT_PREFIX = re.compile(r"^\.text\.(unlikely\.|startup\.|hot\.|exit\.)?")


def strings_of(unit):
    """(pattern, owner) of the strings of a text unit's code: owner names
    the archive member ("*libc.a:member") or function whose strings they
    are, as string_owner names a string section's; (None, None) if none."""
    m = re.match(r"^(\*[^(]*\.a:[^(]+)\(\.text", unit)
    if m:  # an archive member's
        return "%s(.rodata.str*)" % m.group(1), m.group(1)
    m = re.match(r"^\*\((\.text\S*) ", unit)
    if m:  # memdiag's, by function
        fn = TEXT_PREFIX.sub("", m.group(1))
        return "*(.rodata.%s.str* .rodata.%s.*.str*)" % (fn, fn), fn
    return None, None


def string_owner(name, obj):
    """The owner (as strings_of names it) of a string section, or None."""
    m = MEMBER.search(obj)
    if re.match(r"^\.rodata\.str\d", name) and m:
        return "*%s:%s" % (m.group(1), m.group(2))
    if NAMED_STRINGS.match(name) and "ltrans" in obj:
        return CLONE.sub("", name[len(".rodata."):]).rsplit(".str", 1)[0]
    return None


class First:
    """Where a unit was first touched: rank (the order of first touches
    over all runs), code (a .text section), obj and name (its section's)."""
    __slots__ = ("rank", "code", "obj", "name")

    def __init__(self, rank, code, obj, name):
        self.rank, self.code, self.obj, self.name = rank, code, obj, name


def read_trace(path, entry):
    """[(kind, offset)] of a trace, offsets from the binary's start."""
    touches, base = [], None
    for line in open(path):
        p = line.split()
        if len(p) != 2 or p[0] not in ("I", "D"):
            continue
        addr = int(p[1], 16)
        if base is None:
            if p[0] != "I":
                continue
            base = addr - (entry & ~15)  # the first instruction is the entry
        touches.append((p[0], addr - base))
    return touches


def variant_of(obj):
    m = MEMBER.search(obj)
    v = VARIANT.match(m.group(2)) if m and m.group(1) == "libc.a" else None
    return v and "rtm" not in m.group(2) and v


def order_units(secs, traces, also, late, final):
    """Text and rodata units, each list in the order to lay them."""
    starts = [s[0] for s in secs]
    count, first, used = {}, {}, {}
    for touches in traces:
        seen = set()
        for kind, off in touches:
            k = bisect.bisect_right(starts, off) - 1
            if k < 0 or off >= secs[k][0] + secs[k][1]:
                continue
            a, size, name, obj = secs[k]
            if (kind == "I") != name.startswith(".text"):
                continue
            u = pattern(name, obj)
            used.setdefault(u, [size, set()])[1].add(off >> 4)
            if u not in seen:
                seen.add(u)
                count[u] = count.get(u, 0) + 1
                first.setdefault(u, First(len(first), name.startswith(".text"), obj, name))
    # Strings: the linker merges equal strings (and a string with the tail
    # of a longer one) of an output section into one copy, so the copy a
    # run read may lie in another function's strings than its own. Each
    # function executed brings its own strings too, at its rank, and each
    # glibc member its small tables (read where valgrind does not look:
    # sysconf's parse of /sys).
    have = set()  # the owners of the string sections there are
    tables = {}
    for a, size, name, obj in secs:
        m = MEMBER.search(obj)
        if m and (name == ".rodata" and size <= 4096 or name.startswith(".rodata.cst")):
            tables.setdefault("*%s:%s(.text)" % (m.group(1), m.group(2)), set()).add(name)
        owner = string_owner(name, obj)
        if owner:
            have.add(owner)
    for u in [u for u in count if first[u].code]:
        strings, owner = strings_of(u)
        tabs = ["%s(%s)" % (u.split("(")[0], " ".join(sorted(tables[u])))] if u in tables else []
        for t in ([strings] if owner in have else []) + tabs:
            if t not in count:
                count[t], first[t] = count[u], First(first[u].rank, False, first[u].obj, "")
                used[t] = [0, set()]
    units = sorted(count, key=lambda u: (-count[u], first[u].rank))
    # string functions picked per CPU: valgrind's picks are not the CPU's
    text = [u for u in units if first[u].code and not variant_of(first[u].obj)]
    # a big table read in a few places (glibc's ctype tables, 56 KB) after
    # the constants read through, where it holds one window, not two
    sparse = [u for u in units if not first[u].code
              and used[u][0] >= 16384 and len(used[u][1]) * 16 * 4 < used[u][0]]
    rodata = [u for u in units if not first[u].code and u not in sparse] + sparse
    # what this CPU runs that valgrind does not show (its string function
    # picks among them) after what every run executes; the variants other
    # CPUs would pick last, newest instruction sets first (final only: the
    # rounds that look for this CPU's picks must see them fault outside)
    everyone = sum(1 for u in text if count[u] == len(traces))
    extra = [u for u in also if u not in count]
    text = text[:everyone] + list(dict.fromkeys(extra)) + text[everyone:]
    text += [u for u in dict.fromkeys(late) if u not in count and u not in text]
    if final:
        families = {variant_of(first[u].obj).group(1) for u in count
                    if first[u].code and variant_of(first[u].obj)}
        others = sorted(((ISA_ORDER[variant_of(o).group(2)], a, pattern(n, o))
                         for a, size, n, o in secs
                         if n.startswith(".text") and variant_of(o)
                         and variant_of(o).group(1) in families), key=lambda x: x[:2])
        text += [p for p in dict.fromkeys(p for _, _, p in others) if p not in text]
    return text, rodata


def outside(faults_path, map_path, entry):
    """"T pattern" / "R pattern": the code and constants of the input
    sections where runs of a build with the hot sections (MAP its map)
    faulted outside them. FAULTS: `perf script -F ip,addr` of `perf record
    -e page-faults -d` runs, each after a line "RUN"."""
    secs = input_sections(map_path)
    starts = [s[0] for s in secs]
    hot, lines = {}, open(map_path).read().split("\n")
    for i, line in enumerate(lines[:-1]):
        p = line.split()
        if p and p[0] in (".text.memdiag_hot", ".rodata.memdiag_hot"):
            a = (p[1:] if len(p) >= 3 else lines[i + 1].split())[:2]
            hot[p[0]] = (int(a[0], 16), int(a[0], 16) + int(a[1], 16))
    runs, out = [], set()
    for line in open(faults_path):
        p = line.split()
        if p == ["RUN"]:
            runs.append([])
        elif len(p) >= 2 and runs:
            runs[-1].append((int(p[0], 16), int(p[1], 16)))
    for run in runs:
        # the first fault in user space is at the entry point: the load address
        base = next((a - entry for a, ip in run if a == ip and ip < 1 << 47), None)
        if base is None:
            continue
        for a, ip in run:
            off, code = a - base, a >> 12 == ip >> 12
            k = bisect.bisect_right(starts, off) - 1
            if not 0 <= off < 1 << 24 or k < 0 or off >= secs[k][0] + secs[k][1]:
                continue
            name = secs[k][2]
            lo, hi = hot[".text.memdiag_hot" if code else ".rodata.memdiag_hot"]
            if name.startswith(".text" if code else ".rodata") and not lo <= off < hi:
                out.add("%s %s" % ("T" if code else "R", pattern(name, secs[k][3])))
    return sorted(out)


def emit(text, rodata):
    print("/* generated by scripts/hot_text.sh: the code and constants `memdiag")
    print(" * summary` and `diagnose` touch, laid first (see scripts/hot_text.py) */")
    # _fini, which exit runs, with the startup code: alone it would hold a
    # window at the text's end. The constants after .rodata (before it they
    # would join the text's segment), from a window's start.
    for sec, units, where in ((".text.memdiag_hot", ["KEEP (*(SORT_NONE(.fini)))"] + text,
                               "BEFORE .text"),
                              (".rodata.memdiag_hot ALIGN(0x10000)", rodata,
                               "AFTER .rodata")):
        print("SECTIONS\n{\n  %s :\n  {" % sec)
        for u in units:
            print("    " + u)
        print("  }\n}\nINSERT %s;" % where)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--faults"] and len(args) == 4:
        print("\n".join(outside(args[1], args[2], int(args[3], 16))))
        return
    also, final = [], "--final" in args
    if final:
        args.remove("--final")
    late = []
    for opt in ("--also", "--late"):
        if opt in args:
            i = args.index(opt)
            units = [tuple(l.rstrip("\n").split(" ", 1)) for l in open(args[i + 1]) if l.strip()]
            (also if opt == "--also" else late).extend(units)
            del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__.splitlines()[0])
    secs, entry = input_sections(args[0]), int(args[1], 16)
    traces = [read_trace(t, entry) for t in args[2:]]
    text, rodata = order_units(secs, traces, [p for k, p in also if k == "T"],
                               [p for k, p in late if k == "T"], final)
    rodata = [p for k, p in also if k == "R"] + [u for u in rodata if ("R", u) not in also]
    rodata += [p for k, p in late if k == "R" and p not in rodata]
    emit(text, rodata)


if __name__ == "__main__":
    main()
