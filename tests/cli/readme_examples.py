#!/usr/bin/env python3
"""Checks the README's example output against the built binary.

Every ``` block that starts with `$ memdiag summary|diagnose|diff|flamegraph|report|export|predict` over bundled
data is rerun; its output must equal the block line for line. A line "..." (or a
line ending in "...") in the block stands for the rest of the output (or the
rest of that line); a first line "..." for everything before the lines shown: the README may shorten, never disagree. --json examples
are pretty-printed: each "key":value pair they show must be in the output.
usage: readme_examples.py MEMDIAG README"""
import re
import subprocess
import sys


def agrees(want, got):
    if want and want[0].strip() == "...":  # leading "...": the block shows the output's end
        tail = want[1:]
        return len(tail) <= len(got) and agrees(tail, got[len(got) - len(tail):])
    for i, w in enumerate(want):
        if w.strip() == "...":
            return True
        if i >= len(got):
            return False
        if w.endswith("...") and got[i].startswith(w[:-3].rstrip(", ")):
            continue
        if w != got[i]:
            return False
    return len(want) == len(got)


def json_agrees(want, got):
    """A --json example is pretty-printed and shortened: each "key":value
    pair it shows must appear in the real (one-line) output."""
    pairs = re.findall(r'"\w+":(?:"[^"]*"|-?[0-9][0-9.]*)', want)
    return bool(pairs) and all(p in got for p in pairs)


def main():
    memdiag, readme = sys.argv[1], sys.argv[2]
    text = open(readme, encoding="utf-8").read()
    blocks = re.findall(r"```\n\$ memdiag ((?:summary|diagnose|diff|flamegraph|report|export|predict)[^\n]*)\n(.*?)```", text, re.S)
    checked = bad = 0
    for cmd, out in blocks:
        args = cmd.split()
        if any(a.endswith(".pickle") and not a.startswith("tests/") for a in args):
            continue  # illustrative files (evil.pickle) that are not bundled
        r = subprocess.run([memdiag] + args, capture_output=True, text=True)
        checked += 1
        got = r.stdout + r.stderr
        ok = json_agrees(out, got) if "--json" in args else \
            agrees(out.rstrip("\n").splitlines(), got.rstrip("\n").splitlines())
        if not ok:
            bad += 1
            print(f"README example disagrees with the binary: memdiag {cmd}", file=sys.stderr)
    if checked == 0:
        print("no README examples found", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
