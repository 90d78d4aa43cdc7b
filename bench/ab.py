#!/usr/bin/env python3
"""ab.py ROUNDS CMD...: interleaved wall times of several commands, in ms.

Each round runs every command once, in order, so a host whose speed drifts
minute to minute (a shared VM) slows them alike; prints each command's
minimum and median. A command may start with VAR=value words (its
environment). Output goes to /dev/null; a failing run fails.

    python3 bench/ab.py 25 "OLD/memdiag summary F" "build/memdiag summary F"
"""
import os
import shlex
import statistics
import sys

from wall import timed


def split_env(cmd):
    words, env = shlex.split(cmd), dict(os.environ)
    while words and "=" in words[0] and not words[0].startswith(("/", ".")):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return words, env


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[0])
    rounds, cmds = int(sys.argv[1]), sys.argv[2:]
    runs = [split_env(c) for c in cmds]
    times = {c: [] for c in cmds}
    with open(os.devnull, "wb") as null:
        for _ in range(rounds):
            for c, (words, env) in zip(cmds, runs):
                times[c].append(timed(words, null, env) * 1e3)
    for c in cmds:
        print("%9.2f min %9.2f median  %s" % (min(times[c]), statistics.median(times[c]), c))


if __name__ == "__main__":
    main()
