#!/usr/bin/env python3
"""check_driver.py MEMDIAG: driver-level tracing on real runs (tests/data/driver,
2 x H200, `OUT=... sh tests/gpu/driver.sh`) and memdiag run's side of it.

Each run directory holds the capture files memdiag run wrote, a driver file
per CUDA process among them. What must hold: a driver file joins its
process's capture (by pid) and the libraries that asked the driver for
memory are named with their bytes; NCCL's buffers under DDP are found and
explain part of non_framework; a CUDA program without torch stands as a
rank of its own; a SIGKILLed job's file still holds its allocation; the
tracer stood aside for torch.profiler."""
import json
import os
import subprocess
import sys
import tempfile

M = sys.argv[1]
D = "tests/data/driver"
bad = 0


def diagnose(run):
    """The run's ranks, after its JSON passed validate_json.py (schema 1)."""
    out = subprocess.run([M, "diagnose", "--json", f"{D}/{run}"], capture_output=True, text=True,
                         check=True).stdout
    subprocess.run([sys.executable, "tests/cli/validate_json.py"], input=out, text=True, check=True)
    return json.loads(out)["ranks"]


def libs(rank):
    return {l["library"]: l for l in rank["driver"]["libraries"]}


def expect(what, cond):
    global bad
    if not cond:
        bad += 1
        print(f"FAIL {what}", file=sys.stderr)


ranks = diagnose("beta")
expect("beta: snapshot and capture, the driver file joined the capture",
       sorted(r["kind"] for r in ranks) == ["capture", "snapshot"])
cap = [r for r in ranks if r["kind"] == "capture"][0]
lib = libs(cap)
expect("beta: PyTorch's allocator and cuBLAS's own memory", set(lib) == {"libc10_cuda.so",
       "libcublas.so.13"} and lib["libc10_cuda.so"]["at_peak_mib"] == 282.0
       and abs(lib["libcublas.so.13"]["at_peak_mib"] - 128.252) < 0.001
       and abs(cap["driver"]["outside_torch_peak_mib"] - 128.252) < 0.001)

lib = libs([r for r in diagnose("expandable") if r["kind"] == "capture"][0])
expect("expandable segments: PyTorch's memory through cuMemCreate",
       lib["libc10_cuda.so"]["physical"] == 1 and lib["libc10_cuda.so"]["at_peak_mib"] == 272.0)

ranks = diagnose("ddp")
expect("ddp: an empty driver file (the launcher) is dropped",
       sorted(r["kind"] for r in ranks) == ["capture", "capture", "snapshot", "snapshot"])
for r in (x for x in ranks if x["kind"] == "capture"):
    lib = libs(r)
    nccl = lib.get("libnccl.so.2", {})
    expect(f"ddp rank {r['rank']}: NCCL's 484 MiB of cuMemCreate, freed at the end",
           nccl.get("at_peak_mib") == 484.0 and nccl.get("physical") == 1
           and nccl.get("at_end_mib") == 0.0 and nccl.get("calls") == 147)
    nf = [f for f in r["findings"] if f["kind"] == "non_framework"]
    expect(f"ddp rank {r['rank']}: non_framework names NCCL as a site, its settings as advice",
           nf and nf[0]["sites"][0]["site"].startswith("libnccl.so.2")
           and "NCCL_BUFFSIZE" in nf[0]["advice"]
           and any(e.startswith("the other ") for e in nf[0]["evidence"]))

ranks = diagnose("cuda")
drv = [r for r in ranks if r["kind"] == "driver"]
expect("a CUDA program: its driver file is a rank of its own, the program the caller",
       len(drv) == 1 and list(libs(drv[0])) == ["cuda_phases"]
       and drv[0]["driver"]["peak_mib"] == 1216.0 and drv[0]["driver"]["at_end_mib"] == 0.0)

ranks = diagnose("cuda-api")
nf = [f for r in ranks for f in r["findings"] if f["kind"] == "non_framework"]
expect("a CUDA program whose capture (C API) carries its pid: one rank, the trace joined; "
       "its own memory is not called outside PyTorch's allocator",
       [r["kind"] for r in ranks] == ["capture"] and list(libs(ranks[0])) == ["cuda_phases"]
       and nf and not nf[0]["sites"] and not any("driver-level" in e for e in nf[0]["evidence"]))

ranks = diagnose("async")
lib = libs(ranks[0])
expect("cudaMallocAsync (torch keeps no history): phase samples and the driver trace, pool calls",
       [r["kind"] for r in ranks] == ["capture"] and ranks[0]["complete"] == 1
       and lib["libc10_cuda.so"]["calls"] == 1439 and "maximum_peak_allocated_mib" in ranks[0]["indicators"])

ranks = diagnose("killed")
expect("SIGKILL 1.5 s after a 1 GiB allocation: it is in the file",
       libs(ranks[0])["libc10_cuda.so"]["at_peak_mib"] == 1024.0 and ranks[0]["complete"] == 0)

cap = [r for r in diagnose("profiler") if r["kind"] == "capture"][0]
expect("torch.profiler started: the tracer gave CUPTI up",
       cap["driver"]["status"] == "stopped: torch.profiler started")

files = sorted(os.listdir(f"{D}/compiled"))
expect("torch.compile: its workers initialised CUDA and allocated nothing, and left no file",
       [f for f in files if f.startswith("driver-pid")] == ["driver-pid1036.mdcap"]
       and libs([r for r in diagnose("compiled") if r["kind"] == "capture"][0])["libc10_cuda.so"]
       ["at_peak_mib"] == 304.0)

text = subprocess.run([M, "summary", f"{D}/ddp"], capture_output=True, text=True).stdout
expect("summary: the driver table", "libnccl.so.2           NCCL communicator buffers [cuMemCreate]"
       in text and "outside PyTorch's caching allocator: 612.3 MiB at most" in text)
expect("summary: each step's end with the memory live through the driver beside device-used",
       "    step 0           152.6      131.4      198.6       198.6      270.0       1878.9    882.3"
       in text)
expect("summary: NCCL's releases of its peers' imported handles are not frees of lost memory",
       "frees of memory allocated before" not in text)

diff = subprocess.run([M, "diff", f"{D}/beta", f"{D}/ddp"], capture_output=True, text=True).stdout
expect("diff: the driver's peak and each library's largest, before and after",
       "through the driver, peak            410.3      888.3     +478.0" in diff
       and "    libnccl.so.2                        0.0      484.0     +484.0" in diff)
out = subprocess.run([M, "diff", "--json", f"{D}/beta", f"{D}/ddp"], capture_output=True,
                     text=True).stdout
expect("diff --json: the driver figures of a capture", '"driver_peak_mib":888.2520' in out)


def check_report(t):
    """The HTML report: the libraries' table and the trace over time, drawn."""
    page = f"{t}/async.html"
    subprocess.run([M, "report", "-o", page, f"{D}/async"], check=True, capture_output=True)
    html = open(page).read()
    drawn = subprocess.run(["node", "tests/cli/check_page.js", page], capture_output=True,
                           text=True)
    expect("report: a process's driver table and its driver-level memory over time",
           "Device memory through the CUDA driver" in html and "<td>libc10_cuda.so</td>" in html
           and drawn.returncode == 0 and "peak 282.8" in drawn.stdout)


def check_report_samples(t):
    """A capture's phase-sample chart carries the driver series (purple)."""
    page = f"{t}/ddp.html"
    subprocess.run([M, "report", "-o", page, f"{D}/ddp"], check=True, capture_output=True)
    drawn = subprocess.run(["node", "tests/cli/check_page.js", page], capture_output=True,
                           text=True)
    expect("report: the samples' chart has the memory live through the driver, to the tooltip",
           drawn.returncode == 0 and "peak 256.0 driver 404.3" in drawn.stdout)


def record(kind, payload):
    """One capture-file record (docs/capture-format.md)."""
    import struct
    import zlib
    body = bytes([kind]) + payload
    return struct.pack("<I", len(payload)) + body + struct.pack("<I", zlib.crc32(body))


def check_two_gpus(t):
    """A process that allocated on two GPUs: each GPU's peak (made-up records)."""
    import struct
    path = f"{t}/driver-x-pid5.mdcap"
    recs = [record(1, b"kind\0driver\0"), record(1, b"pid\0" + b"5\0")]
    for time, op, dev, ident, mib, caller in ((1, 1, 0, 0x1000, 100, b"libc10_cuda.so"),
                                             (2, 1, 1, 0x2000, 50, b"libc10_cuda.so"),
                                             (3, 5, 1, 7, 20, b"libnccl.so.2")):
        recs.append(record(8, struct.pack("<qBiQQ", time, op, dev, ident, mib << 20) + caller + b"\0"))
    open(path, "wb").write(b"MDCAP\r\n\x1a" + struct.pack("<II", 1, 0) + b"".join(recs))
    out = subprocess.run([M, "summary", path], capture_output=True, text=True).stdout
    expect("summary: a process on two GPUs, each GPU's peak",
           "    by GPU: cuda:0 peak 100.0 MiB, cuda:1 peak 70.0 MiB" in out)


def check_run(t):
    """memdiag run's side: the injection variable reaches the job, or not."""
    def run(*args, env=None):
        e = dict(os.environ)
        e.pop("CUDA_INJECTION64_PATH", None)
        e.update(env or {})
        return subprocess.run([M, "run", "--quiet", "-o", f"{t}/{len(os.listdir(t))}", *args, "--",
                               "sh", "-c", "echo inject=$CUDA_INJECTION64_PATH"],
                              capture_output=True, text=True, env=e)
    r = run()
    expect("run: CUDA_INJECTION64_PATH is the capture library",
           "libmemdiag_capture.so" in r.stdout.split("inject=")[-1])
    expect("run --driver off: no injection", "inject=\n" in run("--driver", "off").stdout)
    r = run(env={"CUDA_INJECTION64_PATH": "/opt/nsight/inject.so"})
    expect("run under another injected tool: it keeps its place, said once",
           "inject=/opt/nsight/inject.so" in r.stdout and "driver-level tracing is off" in r.stderr)
    expect("run --driver maybe: refused", run("--driver", "maybe").returncode == 2)
    reused = f"{t}/reused"
    os.makedirs(reused)
    open(f"{reused}/driver-oldhost-pid7.mdcap", "w").write("an earlier run's")
    open(f"{reused}/notes.txt", "w").write("the user's")
    subprocess.run([M, "run", "--quiet", "--force", "-o", reused, "--", "true"], capture_output=True)
    expect("run --force: the earlier run's driver files go (they would read as this run's "
           "processes), nothing else", sorted(os.listdir(reused)) == ["manifest.json", "notes.txt"])


with tempfile.TemporaryDirectory() as tmp:
    check_report(tmp)
    check_report_samples(tmp)
    check_two_gpus(tmp)
# where the capture library was built beside the binary (not the ThreadSanitizer
# CLI's build, which is the binary alone)
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(M)), "libmemdiag_capture.so")):
    with tempfile.TemporaryDirectory() as tmp:
        check_run(tmp)
sys.exit(1 if bad else 0)
