"""ctypes binding to libmemdiag's capture runtime (include/memdiag.h).

Only glue: the record format, its writing and NVML access are C. The
library (libmemdiag_capture.so: the capture runtime alone) is found through
MEMDIAG_LIB (set by `memdiag run`), then beside this package (an installed
tree), then in build/ of a checkout.
"""
from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

NA = (1 << 64) - 1

PHASES = {"after_model": 0, "after_optimizer_creation": 1, "after_input": 2,
          "after_forward": 3, "after_backward": 4, "after_optimizer_step": 5,
          "after_clear_gradients": 6}


class Sample(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int), ("phase", ctypes.c_int),
                ("allocated", ctypes.c_uint64), ("reserved", ctypes.c_uint64),
                ("peak_allocated", ctypes.c_uint64), ("device_used", ctypes.c_uint64),
                ("device_total", ctypes.c_uint64), ("process_used", ctypes.c_uint64)]


class GpuProcess(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("ppid", ctypes.c_uint32),
                ("used", ctypes.c_uint64), ("name", ctypes.c_char * 64)]


MAX_PROCESSES = 64


class Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("file", ctypes.c_char * 512),
                ("offset", ctypes.c_int64), ("msg", ctypes.c_char * 320)]


def _candidates():
    env = os.environ.get("MEMDIAG_LIB")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "libmemdiag_capture.so"
    yield here.parent.parent / "build" / "libmemdiag_capture.so"


def memdiag_binary():
    """The memdiag command: MEMDIAG_BIN, one installed beside this package,
    a checkout's build/, or PATH's; None if there is none."""
    env = os.environ.get("MEMDIAG_BIN")
    here = Path(__file__).resolve().parent
    for p in ([Path(env)] if env else []) + [here / "memdiag", here.parent.parent / "build" / "memdiag"]:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which("memdiag")


def load() -> ctypes.CDLL:
    for p in _candidates():
        if p.is_file():
            lib = ctypes.CDLL(str(p))
            break
    else:
        raise OSError("memdiag: libmemdiag_capture.so not found (set MEMDIAG_LIB or run 'make')")
    vp = ctypes.c_void_p
    lib.md_cap_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(vp), ctypes.POINTER(Err)]
    lib.md_cap_meta.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p]
    lib.md_cap_write_sample.argtypes = [vp, ctypes.POINTER(Sample)]
    lib.md_cap_write_device_sample.argtypes = [vp, ctypes.c_int, ctypes.POINTER(Sample)]
    lib.md_cap_step.argtypes = [vp, ctypes.c_int]
    lib.md_cap_optimizer_step.argtypes = [vp, ctypes.c_int, ctypes.c_int]
    lib.md_cap_snapshot.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p]
    lib.md_cap_oom.argtypes = [vp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    lib.md_cap_close.argtypes = [vp, ctypes.c_int]
    u64p = ctypes.POINTER(ctypes.c_uint64)
    lib.md_nvml_memory.argtypes = [ctypes.c_char_p, u64p, u64p, u64p]
    procs = ctypes.POINTER(GpuProcess)
    lib.md_nvml_processes.argtypes = [ctypes.c_char_p, procs, ctypes.c_int]
    lib.md_cap_processes.argtypes = [vp, ctypes.c_int, procs, ctypes.c_size_t]
    lib.md_driver_trace_stop.argtypes = [ctypes.c_char_p]
    lib.md_driver_trace_stop.restype = None
    for f in ("md_cap_open", "md_cap_meta", "md_cap_write_sample", "md_cap_write_device_sample",
              "md_cap_step", "md_cap_optimizer_step",
              "md_cap_snapshot", "md_cap_oom", "md_cap_close", "md_nvml_memory",
              "md_nvml_processes", "md_cap_processes"):
        getattr(lib, f).restype = ctypes.c_int
    return lib


class CaptureFile:
    """One capture file (one process: its own device, and any further ones)."""

    def __init__(self, lib: ctypes.CDLL, path: str, overwrite: bool = False):
        self._lib = lib
        self._h = ctypes.c_void_p()
        err = Err()
        rc = lib.md_cap_open(path.encode(), int(overwrite), ctypes.byref(self._h), ctypes.byref(err))
        if rc != 0:
            raise OSError(f"memdiag: {path}: {err.msg.decode(errors='replace')}")
        self.path = path

    def meta(self, key: str, value) -> None:
        self._lib.md_cap_meta(self._h, key.encode(), str(value).encode(errors="replace"))

    def sample(self, step: int, phase: str, allocated: int, reserved: int, peak: int,
               device_used: int = NA, device_total: int = NA, process_used: int = NA) -> None:
        s = Sample(step, PHASES.get(phase, 7), allocated, reserved, peak, device_used,
                   device_total, process_used)
        self._lib.md_cap_write_sample(self._h, ctypes.byref(s))

    def device_sample(self, device: int, step: int, phase: str, allocated: int, reserved: int,
                      peak: int, device_used: int = NA, device_total: int = NA,
                      process_used: int = NA) -> None:
        """The same phase point on a further device of the process."""
        s = Sample(step, PHASES.get(phase, 7), allocated, reserved, peak, device_used,
                   device_total, process_used)
        self._lib.md_cap_write_device_sample(self._h, device, ctypes.byref(s))

    def step(self, n: int, optimizer: int = -1) -> None:
        """Step n finished; optimizer: which one took it (0, 1, ... in the
        order they first stepped), -1 unknown."""
        self._lib.md_cap_optimizer_step(self._h, n, optimizer)

    def snapshot(self, path: str, reason: str) -> None:
        self._lib.md_cap_snapshot(self._h, path.encode(), reason.encode())

    def oom(self, requested: int, free: int, total: int) -> None:
        self._lib.md_cap_oom(self._h, requested, free, total)

    def processes(self, device: int, procs) -> None:
        """The other processes on the device (nvml_processes' array, n of them)."""
        arr, n = procs
        self._lib.md_cap_processes(self._h, device, arr, n)

    def close(self, status: int = 0) -> None:
        if self._h:
            self._lib.md_cap_close(self._h, status)
            self._h = ctypes.c_void_p()


def nvml_memory(lib: ctypes.CDLL, pci_bus_id: str):
    """(used, total, process_used) in bytes, NA where unknown."""
    u, t, p = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    lib.md_nvml_memory(pci_bus_id.encode(), ctypes.byref(u), ctypes.byref(t), ctypes.byref(p))
    return u.value, t.value, p.value


def nvml_processes(lib: ctypes.CDLL, pci_bus_id: str):
    """The other processes NVML lists on the device: (array, count), or
    None where NVML cannot say."""
    arr = (GpuProcess * MAX_PROCESSES)()
    n = lib.md_nvml_processes(pci_bus_id.encode(), arr, MAX_PROCESSES)
    return None if n < 0 else (arr, n)
