"""memdiag's in-process recorder: the thin Python side of `memdiag run`.

Inside every process that imports torch and uses CUDA it
  * turns on torch's allocator history (stacks='python' by default), over the
    whole run or a window of steps, and dumps the snapshot at the end of the
    window, at exit, on an out-of-memory error and on SIGUSR1;
  * samples torch's counters after each forward, before and after each
    optimizer step and after zero_grad, plus device-wide memory from NVML,
    into memdiag's capture file (written by libmemdiag, one record per write).
Nothing here synchronizes the device; nothing is printed but one line.
The phase hooks are torch's global module and optimizer hooks, so user
code is not edited.
"""
from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import sys
import threading
import warnings
import weakref

from . import _lib

PLACEHOLDERS = ("run", "rank", "local_rank", "step", "host", "pid")
PROBE_EVERY = 25  # steps between looks for devices first used after the third step
MAX_OPTIMIZERS = 64  # numbered; more (one made every step) are left unknown
OTHERS_MOVE = 32 << 20  # bytes other processes' use moves before they are listed again


def rank_info(env=os.environ):
    """(rank, local_rank, world_size) from torchrun, Slurm or Open MPI."""
    def first(*names, default=None):
        for n in names:
            v = env.get(n)
            if v is not None and v.strip().lstrip("-").isdigit():
                return int(v)
        return default
    rank = first("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", default=0)
    local = first("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", default=rank)
    world = first("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", default=1)
    return rank, local, world


def expand(template: str, **values) -> str:
    """Fills {run}, {rank}, {local_rank}, {step}, {host}, {pid}; an unknown
    placeholder is an error, not a file named after it."""
    for name in re.findall(r"{([^{}]*)}", template):
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}} in {template!r}; "
                             f"known: {', '.join(PLACEHOLDERS)}")
    out = template
    for k in PLACEHOLDERS:
        out = out.replace("{" + k + "}", str(values.get(k, "")))
    if "/" in out or not out or out in (".", ".."):
        raise ValueError(f"file name template {template!r} gives {out!r}")
    return out


def worker_role(torch) -> str:
    """"DataLoader worker N" inside a DataLoader's worker process (its CUDA
    use starts in the Dataset, a transform or collate_fn), else ""."""
    try:
        info = torch.utils.data.get_worker_info() if torch is not None else None
    except Exception:
        return ""
    return f"DataLoader worker {info.id}" if info is not None else ""


class Window:
    """Skip N optimizer steps, then record M (M = 0: to the end)."""

    def __init__(self, skip: int = 0, record: int = 0):
        if skip < 0 or record < 0:
            raise ValueError("window sizes must be >= 0")
        self.skip, self.record = skip, record

    def active_at_start(self) -> bool:
        return self.skip == 0

    def after_step(self, done: int):
        """Called after optimizer step number `done` (1-based count)."""
        if self.skip and done == self.skip:
            return "start"
        if self.record and done == self.skip + self.record:
            return "stop"
        return None


class Options:
    def __init__(self, env=os.environ):
        self.out = env.get("MEMDIAG_OUT", ".")
        self.run = env.get("MEMDIAG_RUN", "run")
        self.stacks = env.get("MEMDIAG_STACKS", "python")
        self.context = env.get("MEMDIAG_CONTEXT", "all")
        self.max_entries = int(env.get("MEMDIAG_MAX_ENTRIES", "1000000"))
        self.window = Window(int(env.get("MEMDIAG_SKIP_STEPS", "0")),
                             int(env.get("MEMDIAG_RECORD_STEPS", "0")))
        self.name = env.get("MEMDIAG_NAME", "rank{rank}")
        self.force = env.get("MEMDIAG_FORCE", "") == "1"
        self.quiet = env.get("MEMDIAG_QUIET", "") == "1"
        if self.stacks not in ("python", "all", "none"):
            raise ValueError(f"MEMDIAG_STACKS={self.stacks!r}: python, all or none")
        if self.context not in ("all", "alloc"):
            raise ValueError(f"MEMDIAG_CONTEXT={self.context!r}: all or alloc")


class Recorder:
    """One per process. `counters` returns (allocated, reserved, peak) in
    bytes; `torch` is the torch module or None (tests)."""

    def __init__(self, opts: Options, torch=None, counters=None, lib=None):
        self.opts = opts
        self.torch = torch
        self.counters = counters
        self._lib_handle = lib  # loaded on first use: snapshot-only users need no .so
        self.rank, self.local_rank, self.world = rank_info()
        self.cap = None
        self.steps = 0
        self.sampled_forward = -1
        # each optimizer's number, in the order they first stepped: where
        # several step in turn (a GAN), memdiag compares iterations
        self.optimizers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.step_optimizer = -1
        self.in_step = False  # between the optimizer step's pre- and post-hook
        self.stepping = None  # id() of the optimizer whose step runs: a wrapper
        # (ZeroRedundancyOptimizer) steps the one it wraps inside its own step,
        # one step, the wrapper's
        self.closure = False  # this step's backward runs inside its optimizer step
        self.pending_backward = False
        self.scaler_stepped = False  # a GradScaler's step ran since the last step
        self.grad_forward = False  # this step's after_forward was sampled at autograd.grad
        self.disabled = False
        self.recording = False
        self.oom_seen = False
        self.oom_steps = -1  # self.steps at the last out-of-memory error
        self.failed_zero = False  # this zero_grad ends an attempt an OOM failed
        self.cleared = True  # a zero_grad closed the last step already
        self.pci = None
        self.device = None  # the process's own device: the current one (see _own_device)
        self.ndevices = 1
        self.further = set()  # further devices the process uses (reserved memory, a context)
        self.pcis = {}  # device -> NVML's PCI bus id (None: unknown)
        self.others_seen = 0  # bytes NVML counted beside this process when last listed
        #                       (None: listing failed once, not tried again)
        self.unreadable = set()  # devices whose statistics failed once: not asked again
        self.lock = threading.Lock()
        self.dumped = set()
        self.suffix = ""  # "-pidN" when another process of this rank took the name
        self.saw_reserved = False

    @property
    def lib(self):
        if self._lib_handle is None:
            self._lib_handle = _lib.load()
        return self._lib_handle

    # ---- files ------------------------------------------------------------
    def _name(self, step=None) -> str:
        return expand(self.opts.name, run=self.opts.run, rank=self.rank,
                      local_rank=self.local_rank, host=socket.gethostname(), pid=os.getpid(),
                      step="" if step is None else step)

    def _open(self):
        if self.cap is not None:
            return
        path = os.path.join(self.opts.out, self._name() + ".mdcap")
        try:
            self.cap = _lib.CaptureFile(self.lib, path, overwrite=self.opts.force)
        except OSError:
            # two processes with the same rank (no RANK set, several CUDA
            # processes): the second gets its pid in its names, snapshots too
            self.suffix = f"-pid{os.getpid()}"
            path = os.path.join(self.opts.out, self._name() + self.suffix + ".mdcap")
            self.cap = _lib.CaptureFile(self.lib, path, overwrite=self.opts.force)
        self.cap_path = path
        for k, v in self._metadata().items():
            self.cap.meta(k, v)
        if not self.opts.quiet and self.rank == 0:
            print(f"memdiag: recording to {self.opts.out}", file=sys.stderr, flush=True)

    def _metadata(self) -> dict:
        meta = {"rank": self.rank, "local_rank": self.local_rank, "world_size": self.world,
                "host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid(),
                "argv": " ".join(sys.argv),
                "stacks": self.opts.stacks,
                "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
        t = self.torch
        role = worker_role(t)
        if role:
            meta["role"] = role
        if t is not None:
            meta["torch"] = t.__version__
            meta["cuda"] = t.version.cuda or ""
            self.ndevices = t.cuda.device_count()
            p = t.cuda.get_device_properties(t.cuda.current_device())
            meta["gpu"] = p.name
            meta["device_total_mib"] = p.total_memory / 2**20
        return meta

    # ---- samples ----------------------------------------------------------
    def sample(self, phase: str, step: int | None = None) -> None:
        """One record of torch's counters (no device sync) and NVML's."""
        if self.counters is None:
            return
        with self.lock:
            self._open()
            alloc, res, peak = self.counters()
            if self.steps < 3 or self.device is None:  # later: at the 25-step looks
                self._own_device()
            self.saw_reserved = self.saw_reserved or res > 0
            used = total = proc = _lib.NA
            if self.pci:
                used, total, proc = _lib.nvml_memory(self.lib, self.pci)
            step = self.steps if step is None else step
            self.cap.sample(step, phase, alloc, res, peak, used, total, proc)
            self._other_processes(used, proc)
            for d in self._further_devices():
                try:
                    self._sample_further(d, step, phase)
                except Exception:  # a further device is never worth the whole capture
                    self.unreadable.add(d)

    def _other_processes(self, used: int, proc: int) -> None:
        """Other processes on this GPU (another job, DataLoader workers that
        made CUDA contexts): listed when what NVML counts beside this
        process moves by OTHERS_MOVE, so a steady neighbour costs nothing."""
        if used == _lib.NA or proc == _lib.NA or used < proc or self.others_seen is None:
            return
        others = used - proc
        if abs(others - self.others_seen) < OTHERS_MOVE:
            return
        self.others_seen = others
        try:
            procs = _lib.nvml_processes(self.lib, self.pci)
            if procs is not None:
                self.cap.processes(self.device if self.device is not None else -1, procs)
        except Exception:  # the list of others is never worth the whole capture
            self.others_seen = None

    def _own_device(self) -> None:
        """The process's device is the current one: a torchrun process may
        start CUDA on cuda:0 and then move to its local rank's. Asked at each
        sample of the first steps, then at the 25-step looks; the capture says
        which (META cuda_device) when it changes, and NVML follows it."""
        if self.torch is None:
            return
        d = self.torch.cuda.current_device()
        if d != self.device:
            self.device = d
            self.cap.meta("cuda_device", d)
            self.pci = self._pci_of_device(d)

    def _further_devices(self):
        """The other devices to sample: every visible one for the first three
        steps (DataParallel's replicas start at the first forward, a split
        model before it), then those the process used by then (memory
        reserved, or a CUDA context); other ranks' GPUs, visible but unused,
        stop costing a call."""
        if self.ndevices < 2 or self.device is None:
            return ()
        if self.steps < 3:
            found = range(self.ndevices)
        else:
            found = sorted(self.further)
        return [d for d in found if d != self.device and d not in self.unreadable]

    def _probe_devices(self) -> None:
        """Past the first steps, a device the process starts to use later
        (evaluation on another GPU, a tensor moved there, a CUDA call that
        made a context there) is looked for now and then: per idle device,
        one statistics call and, where it holds nothing, one NVML query."""
        if self.torch is None or self.counters is None or self.cap is None:
            return
        self._own_device()
        for d in range(self.ndevices):
            if d == self.device or d in self.further or d in self.unreadable:
                continue
            try:
                if self.counters(d)[1] > 0 or self._context_on(d):
                    self.further.add(d)
            except Exception:
                self.unreadable.add(d)

    def _context_on(self, d: int) -> bool:
        """NVML: does this process hold memory on device d (a context)?"""
        pci = self._pci_of_device(d)
        if not pci:
            return False
        proc = _lib.nvml_memory(self.lib, pci)[2]
        return 0 < proc < _lib.NA

    def _sample_further(self, d: int, step: int, phase: str) -> None:
        """A device is this process's too once it reserved memory there, or,
        NVML says, holds a CUDA context there (a CUDA call on it before
        set_device); NVML is asked for every device while they are found."""
        alloc, res, peak = self.counters(d)
        used = total = proc = _lib.NA
        if res > 0 or self.steps < 3 or d in self.further:
            pci = self._pci_of_device(d)
            if pci:
                used, total, proc = _lib.nvml_memory(self.lib, pci)
        if res > 0 or 0 < proc < _lib.NA:
            self.further.add(d)
            self.saw_reserved = self.saw_reserved or res > 0
        self.cap.device_sample(d, step, phase, alloc, res, peak, used, total, proc)

    def _pci_of_device(self, d: int):
        if d not in self.pcis:
            try:
                self.pcis[d] = pci_of(self.torch.cuda.get_device_properties(d))
            except Exception:
                self.pcis[d] = None
        return self.pcis[d]

    def before_backward(self) -> None:
        # the first backward of a step ends its forward (with gradient
        # accumulation, later micro-batches are not sampled again); one
        # sampled at autograd.grad is sampled again (the reader takes the last)
        if self.sampled_forward != self.steps or self.grad_forward:
            self.sampled_forward = self.steps
            self.grad_forward = False
            self.sample("after_forward")

    def before_grad(self) -> None:
        # torch.autograd.grad before the step's first backward: its forward's
        # end unless a backward comes later in the step (a gradient penalty,
        # MAML's inner steps: then that one's); a step of autograd.grad alone
        # (DP-SGD's per-sample gradients by torch.func) has no other
        if self.sampled_forward != self.steps and not self.in_step:
            self.sampled_forward = self.steps
            self.grad_forward = True
            self.sample("after_forward")

    def before_optimizer_step(self, optimizer=None) -> None:
        if self.in_step and self.stepping not in (None, id(optimizer)):
            return  # an optimizer stepped inside another's step
        self.stepping = id(optimizer)
        self.in_step = True
        # no backward yet: a closure (PyTorch Lightning's automatic
        # optimization) runs forward and backward inside the step; the
        # backward's end is its after_backward
        self.closure = self.sampled_forward != self.steps
        if self.closure:
            self.pending_backward = True
        else:
            self.sample("after_backward")

    def after_backward(self) -> None:
        if self.pending_backward:
            self.pending_backward = False
            self.sample("after_backward")

    def after_optimizer_step(self, optimizer=None) -> None:
        if self.in_step and self.stepping not in (None, id(optimizer)):
            return  # the inner step's end; the wrapper's comes next
        self.stepping = None
        self.in_step = False
        self.step_optimizer = self._optimizer_number(optimizer)
        self.sample("after_optimizer_step")
        if self.closure:  # gradients stay until the next step's closure zeroes them
            self.sample("after_clear_gradients")
        self._end_step()

    def before_zero_grad(self) -> None:
        # a forward and a backward since the last step, a GradScaler's step
        # but no optimizer step: GradScaler skipped it (the gradients
        # overflowed, typically at the first steps of fp16 training). It
        # still counts as a step, with an empty optimizer phase. (Inside a
        # closure: the step's own. Without a GradScaler the iteration goes
        # on: sharpness-aware minimization clears the gradients of its first
        # pass before its second backward.)
        # After an out-of-memory error in this step, the attempt failed (the
        # job caught it and tries again, smaller): no step; the retry's
        # forward is sampled anew.
        self.failed_zero = self.oom_steps == self.steps and not self.in_step
        if self.failed_zero:
            self.sampled_forward = -1
        elif self.sampled_forward == self.steps and not self.in_step and self.scaler_stepped:
            self.sample("after_backward")
            self.sample("after_optimizer_step")
            self._end_step()

    def _optimizer_number(self, optimizer) -> int:
        try:
            n = self.optimizers.get(optimizer)
            if n is None and len(self.optimizers) < MAX_OPTIMIZERS:
                n = self.optimizers[optimizer] = len(self.optimizers)
            return -1 if n is None else n
        except TypeError:  # not weakly referable: unknown
            return -1

    def scaler_step(self) -> None:
        self.scaler_stepped = True

    def _end_step(self) -> None:
        self.cleared = False
        self.pending_backward = False  # a step that ran no backward leaves none due
        self.scaler_stepped = False
        self.grad_forward = False
        self.steps += 1
        if self.cap is not None:
            self.cap.step(self.steps - 1, self.step_optimizer)
        self.step_optimizer = -1  # a step GradScaler skipped has none
        if self.steps > 3 and self.steps % PROBE_EVERY == 0:
            self._probe_devices()
        edge = self.opts.window.after_step(self.steps)
        if edge == "start":
            self.start_history()
        elif edge == "stop":
            self.dump("window")
            self.stop_history()

    def after_zero_grad(self) -> None:
        # zero_grad closes the step just finished (also when called at the
        # start of the next one, and the first one after it also where
        # forward passes ran since: adversarial training's attack before the
        # model's zero_grad, as the snapshot reads it); before any step,
        # inside a closure, or a later one after the next step's forward
        # (sharpness-aware minimization clears its first pass's gradients),
        # it closes nothing
        if (self.steps and not self.in_step and not self.failed_zero and
                (not self.cleared or self.sampled_forward != self.steps)):
            self.sample("after_clear_gradients", step=self.steps - 1)
            if self.sampled_forward == self.steps:  # the attack's: the step's forward
                self.grad_forward = True          # comes after this zero_grad, sampled anew
            self.cleared = True
        self.failed_zero = False

    # ---- allocator history ------------------------------------------------------
    def start_history(self) -> None:
        t = self.torch
        if t is None or self.opts.stacks == "none" or self.recording:
            return
        try:
            t.cuda.memory._record_memory_history(enabled="all", context=self.opts.context,
                                                 stacks=self.opts.stacks,
                                                 max_entries=self.opts.max_entries)
        except RuntimeError as e:
            if "cudaMallocAsync" not in str(e):
                raise
            # torch keeps no history under backend:cudaMallocAsync: the phase
            # samples (and memdiag run's driver-level trace) go on without it
            self.opts.stacks = "none"
            print("memdiag: torch keeps no allocator history with backend:cudaMallocAsync; "
                  "recording phase samples and driver-level allocations only", file=sys.stderr)
            return
        self.recording = True
        self._attach_oom_observer()

    def stop_history(self) -> None:
        if self.torch is not None and self.recording:
            self.torch.cuda.memory._record_memory_history(enabled=None)
            self.recording = False

    def dump(self, reason: str) -> str | None:
        t = self.torch
        if t is None or not self.recording:
            return None
        step = self.steps if reason == "window" or "{step}" in self.opts.name else None
        base = self._name(step) + self.suffix  # the capture file's pid suffix, if it took one
        path = os.path.join(self.opts.out, base + ("" if reason == "exit" else f"-{reason}")
                            + ".pickle")
        if path in self.dumped:
            return path
        try:
            t.cuda.memory._dump_snapshot(path)
        except Exception as e:  # a failing dump must not take the job down
            print(f"memdiag: snapshot {path} failed: {e}", file=sys.stderr)
            return None
        self.dumped.add(path)
        if self.cap is not None:
            self.cap.snapshot(path, reason)
        return path

    def _attach_oom_observer(self) -> None:
        attach = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return

        def observer(device, alloc, limit, device_free):
            # torch passes the allocator's limit: the device total, or the
            # memory fraction's share of it
            self.oom_seen = True
            self.oom_steps = self.steps
            self._open()
            self.cap.oom(int(alloc), int(device_free), int(limit))
            self.dump("oom")
        attach(observer)

    def on_signal(self, signum, frame) -> None:
        self.dump("signal")

    def idle(self) -> bool:
        """Whether this process used CUDA but never torch's allocator: no
        step, no OOM, nothing ever reserved on any device (torch.compile's
        compile workers start CUDA and allocate nothing)."""
        if self.steps or self.oom_seen or self.saw_reserved or self.torch is None:
            return False
        try:
            c = self.torch.cuda
            return not any(c.max_memory_reserved(d) for d in range(c.device_count()))
        except Exception:  # unsure: keep the files
            return False

    def close(self) -> None:
        if self.idle():  # leaves no files: nothing in them, and a name taken
            self.stop_history()
            if self.cap is not None:
                self.cap.close(0)
                self.cap = None
                try:
                    os.unlink(self.cap_path)
                except OSError:
                    pass
            return
        if self.cap is not None and not self.disabled:
            # the counters once more: the peak of a step that failed (an
            # OOM) or ran after the last hook is only here
            try:
                self.sample("at_exit", step=-1)
            except Exception:  # a late failure must not lose the snapshot
                pass
        if self.recording:
            self.dump("exit")
            self.stop_history()
        if self.cap is not None:
            # 3: out of memory, and no step completed after it (a job that
            # caught the error and went on ends 0)
            self.cap.close(3 if self.oom_seen and self.steps <= self.oom_steps else 0)
            self.cap = None


def _safe(rec: Recorder, fn, with_optimizer: bool = False):
    """A hook must never break the job: on any error, capture stops with
    one line on stderr and the job goes on. with_optimizer: fn gets the
    hook's first argument (an optimizer step hook's optimizer)."""
    def call(*a, **k):
        if rec.disabled:
            return
        try:
            fn(a[0]) if with_optimizer and a else fn()
        except Exception as e:
            rec.disabled = True
            print(f"memdiag: capture stopped: {type(e).__name__}: {e}", file=sys.stderr)
    return call


def _forget_filter(f) -> None:
    try:
        warnings.filters.remove(f)
        warnings._filters_mutated()  # CPython caches filter lookups per module
    except (ValueError, AttributeError):
        pass


def install_torch_hooks(rec: Recorder, torch) -> None:
    """Phase points without per-module cost: a one-shot global forward
    pre-hook for the baseline before the first forward (removed after it
    fires: global module hooks would put every module call on torch's slow
    path), autograd's entry for "after forward" (the state just before
    backward, loss included, as the seed script samples it), the global
    optimizer step hooks, and zero_grad on optimizers and modules."""
    from torch.nn.modules import module as modmod
    handle = []
    # torch.compile warns when a compiled module is called with global
    # hooks present, as they would fire twice; this one fires once and is
    # gone, so its warning is silenced until then (and only its)
    warnings.filterwarnings("ignore", category=UserWarning,
                            message=r"Using `torch\.compile\(module\)` when there are global hooks")
    quiet = warnings.filters[0]

    forward_seen = []

    def first_forward(m, a):
        handle[0].remove()
        forward_seen.append(1)
        _forget_filter(quiet)
        _safe(rec, lambda: rec.sample("after_input", step=-1))()
    handle.append(modmod.register_module_forward_pre_hook(first_forward))
    wrap_first_optimizer(rec, torch, forward_seen)

    orig_backward = torch.autograd.backward

    before_backward = _safe(rec, rec.before_backward)
    after_backward = _safe(rec, rec.after_backward)

    def backward(*a, **k):
        before_backward()
        r = orig_backward(*a, **k)
        after_backward()
        return r
    backward.__wrapped__ = orig_backward
    torch.autograd.backward = backward

    orig_grad = getattr(torch.autograd, "grad", None)
    before_grad = _safe(rec, rec.before_grad)

    def grad(*a, **k):
        before_grad()
        return orig_grad(*a, **k)
    if orig_grad is not None:
        grad.__wrapped__ = orig_grad
        torch.autograd.grad = grad

    from torch.optim import optimizer as optmod
    optmod.register_optimizer_step_pre_hook(
        _safe(rec, rec.before_optimizer_step, with_optimizer=True))
    optmod.register_optimizer_step_post_hook(
        _safe(rec, rec.after_optimizer_step, with_optimizer=True))
    after_zero_grad = _safe(rec, rec.after_zero_grad)
    before_zero_grad = _safe(rec, rec.before_zero_grad)

    def wrap(cls):
        orig = cls.zero_grad

        def zero_grad(self, *a, **k):
            before_zero_grad()
            r = orig(self, *a, **k)
            after_zero_grad()
            return r
        zero_grad.__wrapped__ = orig
        cls.zero_grad = zero_grad
    wrap(torch.optim.Optimizer)
    wrap(torch.nn.Module)
    wrap_grad_scalers(rec, torch)
    yield_cupti_to_profiler(rec, torch)


def wrap_first_optimizer(rec: Recorder, torch, forward_seen: list) -> None:
    """A baseline for loops that call no module (a model of raw tensors):
    the first optimizer made before any module's forward (forward_seen
    empty) samples after_optimizer_creation, which readers take where
    after_input is missing. Once: the wrapper then takes itself out."""
    cls = torch.optim.Optimizer
    orig = cls.__init__
    sample = _safe(rec, lambda: rec.sample("after_optimizer_creation", step=-1))

    def __init__(self, *a, **k):
        orig(self, *a, **k)
        if cls.__init__ is __init__:
            cls.__init__ = orig
            if not forward_seen:
                sample()
    __init__.__wrapped__ = orig
    cls.__init__ = __init__


def wrap_grad_scalers(rec: Recorder, torch) -> None:
    """GradScaler.step, which tells a step the scaler skipped (overflowed
    gradients, no optimizer step) from a zero_grad inside an iteration.
    torch.cuda.amp's GradScaler inherits torch.amp's (torch >= 2.3)."""
    scaler_step = _safe(rec, rec.scaler_step)
    for mod in (getattr(torch, "amp", None), getattr(getattr(torch, "cuda", None), "amp", None)):
        cls = getattr(mod, "GradScaler", None)
        if cls is None or "step" not in vars(cls):
            continue

        def step(self, *a, _orig=cls.step, **k):
            scaler_step()
            return _orig(self, *a, **k)
        step.__wrapped__ = cls.step
        cls.step = step


def yield_cupti_to_profiler(rec: Recorder, torch) -> None:
    """CUPTI (CUDA 13.0) takes one subscriber: memdiag's driver-level tracer
    has it from cuInit, and torch.profiler would get no CUDA events. The
    tracer gives it up when a profiler is about to start (the rest of the
    run is then traced by torch's recorder and the samples alone)."""
    autograd = getattr(torch, "autograd", None)
    mods = [m for m in (getattr(autograd, "profiler", None), autograd) if m is not None]
    done = []

    def stop():
        if not done:
            done.append(1)
            rec.lib.md_driver_trace_stop(b"torch.profiler started")

    for mod in mods:
        for name in ("_prepare_profiler", "_enable_profiler"):
            orig = getattr(mod, name, None)
            if orig is None:
                continue

            def call(*a, _orig=orig, **k):
                try:  # even when the capture itself stopped: the tracer is apart
                    stop()
                except Exception:
                    pass
                return _orig(*a, **k)
            call.__wrapped__ = orig
            setattr(mod, name, call)


def pci_of(props):
    """NVML's PCI bus id of a device, from torch's device properties."""
    try:
        return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        return None


def counters_of(torch):
    """(allocated, reserved, peak allocated) on a device (default: the
    current one). One call for the three: torch.cuda.memory_allocated() and
    its siblings each build every allocator statistic into a flat, sorted
    dict to read one of them, and a sample runs four times a step. Reading
    another device's statistics creates no context on it."""
    nested = getattr(torch.cuda, "memory_stats_as_nested_dict", None)

    def counters(device=None):
        if nested is not None:
            s = nested(device)
            a = s.get("allocated_bytes", {}).get("all")
            r = s.get("reserved_bytes", {}).get("all")
            if a is not None and r is not None:
                return a.get("current", 0), r.get("current", 0), a.get("peak", 0)
        return (torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device),
                torch.cuda.max_memory_allocated(device))
    return counters


def attach(torch) -> Recorder | None:
    """Called once torch is imported: arm the recorder for when CUDA starts."""
    opts = Options()
    rec = Recorder(opts, torch=torch, counters=None)
    install_torch_hooks(rec, torch)
    orig_init = torch.cuda._lazy_init
    state = {"armed": True}

    def lazy_init(*a, **k):
        r = orig_init(*a, **k)
        if state["armed"] and torch.cuda.is_initialized():
            state["armed"] = False
            rec.counters = counters_of(torch)

            def begin():
                if opts.window.active_at_start():
                    rec.start_history()
                rec.sample("cuda_init")  # device use of a bare context
            _safe(rec, begin)()
        return r
    torch.cuda._lazy_init = lazy_init
    atexit.register(rec.close)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGUSR1, rec.on_signal)
        except (ValueError, OSError):
            pass
    return rec
