"""A stand-in for torch, just enough of its API for memdiag's capture glue
to run in CI without a GPU (tests/python/test_run.sh). Counters follow a
fake allocator driven by the test script; _dump_snapshot writes a small
valid allocator snapshot. Never installed; only on PYTHONPATH in tests."""
import os
import pickle
import types

__version__ = "0.0+fake"
version = types.SimpleNamespace(cuda="13.0")
_state = {"init": False, "allocated": 0, "reserved": 0, "peak": 0, "history": None,
          "oom": None, "grad": True}


def is_grad_enabled():
    return _state["grad"]


_others = {}  # device (1 up to FAKE_TORCH_DEVICES - 1) -> its counters


def _counters(d):
    """The counters of device d (None or 0: the current device, _state)."""
    if d in (None, 0):
        return _state
    return _others.setdefault(d, {"allocated": 0, "reserved": 0, "peak": 0})


def fake_alloc(nbytes, device=None):
    """Test hook: the job allocates (or frees, if negative) nbytes, on
    _state["alloc_device"] unless told (a job that names its GPU in each
    tensor: "cuda:1", while cuda:0 stays current)."""
    cuda._lazy_init()
    c = _counters(_state.get("alloc_device", 0) if device is None else device)
    c["allocated"] += nbytes
    c["reserved"] = max(c["reserved"], c["allocated"])
    c["peak"] = max(c["peak"], c["allocated"])


def fake_oom(nbytes):
    if _state["oom"]:
        _state["oom"](0, nbytes, _state["allocated"], 1 << 20)
    raise cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes} bytes")


class _Props:
    name = "Fake GPU"
    total_memory = 80 << 30
    pci_domain_id = 0
    pci_bus_id = 0x19
    pci_device_id = 0


class _Memory:
    @staticmethod
    def _record_memory_history(enabled="all", stacks="all", max_entries=0, **kw):
        _state["history"] = None if enabled is None else {"stacks": stacks, "max": max_entries}

    @staticmethod
    def _dump_snapshot(path):
        seg = {"device": 0, "address": 1 << 40, "total_size": 20 << 20,
               "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
               "frames": [], "blocks": [{"address": 1 << 40, "size": 20 << 20,
                                         "requested_size": 0, "state": "inactive", "frames": []}]}
        tr = [{"action": "segment_alloc", "addr": 1 << 40, "size": 20 << 20, "stream": 0,
               "time_us": 1, "frames": []}]
        with open(path, "wb") as f:
            pickle.dump({"segments": [seg], "device_traces": [tr],
                         "allocator_settings": {"expandable_segments": False}}, f)


class _Cuda(types.ModuleType):
    OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})
    memory = _Memory()

    def _lazy_init(self):
        _state["init"] = True

    def is_available(self):  # `memdiag probe` asks; FAKE_TORCH_NO_CUDA says no
        return not os.environ.get("FAKE_TORCH_NO_CUDA")

    def is_initialized(self):
        return _state["init"]

    def current_device(self):
        return 0

    def get_device_properties(self, d):
        return _Props()

    def memory_allocated(self, d=None):
        return _counters(d)["allocated"]

    def memory_reserved(self, d=None):
        return _counters(d)["reserved"]

    def max_memory_allocated(self, d=None):
        return _counters(d)["peak"]

    def max_memory_reserved(self, d=None):
        return _counters(d)["reserved"]

    def memory_stats_as_nested_dict(self, d=None):
        c = _counters(d)
        return {"allocated_bytes": {"all": {"current": c["allocated"], "peak": c["peak"]}},
                "reserved_bytes": {"all": {"current": c["reserved"], "peak": c["reserved"]}}}

    def device_count(self):
        return int(os.environ.get("FAKE_TORCH_DEVICES", "1"))


cuda = _Cuda("torch.cuda")
_C = types.SimpleNamespace(
    _cuda_attach_out_of_memory_observer=lambda cb: _state.__setitem__("oom", cb))

def _backward(*a, **k):
    """What a test sets as _state["on_backward"] happens inside backward."""
    if _state.get("on_backward"):
        _state["on_backward"]()


def _grad(*a, **k):
    return None


autograd = types.SimpleNamespace(backward=_backward, grad=_grad)


class Tensor:
    def backward(self):
        autograd.backward(self)


class GradScaler:
    """torch.amp's: step() calls the optimizer's step unless the
    gradients overflowed (here: while skip is set)."""
    def __init__(self, skip=False):
        self.skip = skip

    def step(self, opt):
        if not self.skip:
            opt.step()


amp = types.SimpleNamespace(GradScaler=GradScaler)


from . import nn, optim  # noqa: E402,F401
