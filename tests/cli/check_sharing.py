#!/usr/bin/env python3
"""Checks memdiag on a GPU shared with other processes (tests/data/sharing,
captured on an H200 by `SCRIPT=examples/sharing.py sh tests/gpu/patterns.sh`
from examples/sharing.py): another job's 6 GiB named as another job's, by
pid; two DataLoader workers' CUDA contexts named as this process's
children, the workers' own files shown as its helpers and compared with no
rank; a sweep's two processes on one GPU each naming the other as a
sibling, both snapshots read. None leaks.
    python3 tests/cli/check_sharing.py MEMDIAG DIR"""
import sys
import tempfile

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check


def non_framework(rank):
    found = [f for f in rank["findings"] if f["kind"] == "non_framework"]
    return found[0] if found else {"summary": "", "advice": "", "sites": [], "severity": ""}


def main_capture(d):
    return [r for r in d["ranks"] if r["kind"] == "capture" and "helper_of" not in r]


for case in ("neighbour", "workers", "sweep"):
    d = runs.diagnosis(case)
    check(f"{case}: no leak", not [f for r in d["ranks"] for f in r["findings"]
                                   if f["kind"] == "leak"])
    check(f"{case}: no cross-rank finding", d["findings"] == [])

d = runs.diagnosis("neighbour")
nf = non_framework(main_capture(d)[0])
check("neighbour: another job's 6.5 GiB named by pid",
      "6676.4 MiB of it by another process on this GPU (pid 491)" in nf["summary"] and
      nf["severity"] == "warning" and nf["advice"].startswith("Another job shares this GPU"))
check("neighbour: its site, its command line",
      nf["sites"][0]["site"].startswith("pid 491 (another job): python3 -c import os, time, torch"))

d = runs.diagnosis("workers")
main = main_capture(d)
nf = non_framework(main[0])
check("workers: the main process's two children named, with the DataLoader advice",
      len(main) == 1 and "1268.0 MiB of it by 2 child processes of this one (started by "
      "multiprocessing" in nf["summary"] and nf["advice"].startswith("Child processes of this "
                                                                    "one use the GPU"))
helpers = [r for r in d["ranks"] if "helper_of" in r]
check("workers: each worker's snapshot and capture a helper of pid 514, by role",
      sorted((r["kind"], r["role"], r["helper_of"]) for r in helpers) ==
      [("capture", "DataLoader worker 0", 514), ("capture", "DataLoader worker 1", 514),
       ("snapshot", "DataLoader worker 0", 514), ("snapshot", "DataLoader worker 1", 514)])
check("workers: no finding of the workers' own (their parent's names their memory)",
      all(not r["findings"] for r in helpers))
text = runs.run("summary", runs.path("workers"))
check("workers: the ranks compared, the workers labelled",
      "== ranks compared" in text and "(DataLoader worker 1 of pid 514)" in text and
      "uses        624.0 MiB of cuda:0 at most (NVML), 2.0 MiB of it reserved by PyTorch" in text)

with tempfile.TemporaryDirectory() as tmp:
    runs.run("report", runs.path("workers"), "-o", f"{tmp}/r.html")
    page = open(f"{tmp}/r.html", encoding="utf-8").read()
check("workers: the report labels the workers' sections and rows as helpers",
      "DataLoader worker 1 of pid 514: " in page and page.count("cuda:0 (helper)") == 2)

d = runs.diagnosis("sweep")
snaps = sorted(r["source"].split("/")[-1] for r in d["ranks"] if r["kind"] == "snapshot")
check("sweep: both processes' snapshots read", snaps == ["rank0-pid652.pickle.xz",
                                                       "rank0.pickle.xz"])
caps = main_capture(d)
check("sweep: each process names the other as a sibling",
      len(caps) == 2 and all(
          "3428.4 MiB of it by another process started by this one's parent" in
          non_framework(r)["summary"] and
          non_framework(r)["advice"].startswith("Processes started together share this GPU")
          for r in caps))
sys.exit(runs.done())
