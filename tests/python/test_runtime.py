"""Unit tests of memdiag's Python glue with plain python3 (no torch, no
GPU): name templates, rank detection, the step window, and the ctypes
binding writing a capture file the C reader accepts."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
from memdiag import _lib, runtime  # noqa: E402

MEMDIAG = os.environ.get("MEMDIAG", os.path.join(ROOT, "build", "memdiag"))


class Counters(unittest.TestCase):
    """One statistics call a sample where torch has the nested dict; the three
    flat getters where it has not; the same figures either way."""

    class Flat:  # device None: the current one (1, 2, 3); cuda:1 ten times that
        def memory_allocated(self, device=None):
            return 1 if device is None else 10 * device

        def memory_reserved(self, device=None):
            return 2 if device is None else 20 * device

        def max_memory_allocated(self, device=None):
            return 3 if device is None else 30 * device

    class Nested(Flat):
        calls = 0

        def memory_stats_as_nested_dict(self, device=None):
            self.calls += 1
            k = 1 if device is None else 10 * device
            return {"allocated_bytes": {"all": {"current": 1 * k, "peak": 3 * k}},
                    "reserved_bytes": {"all": {"current": 2 * k, "peak": 2 * k}}}

        def memory_allocated(self, device=None):
            raise AssertionError("flat getter called")

    def test_both_paths(self):
        class T:
            pass
        for cuda in (self.Flat(), self.Nested()):
            t = T()
            t.cuda = cuda
            self.assertEqual(runtime.counters_of(t)(), (1, 2, 3))
            self.assertEqual(runtime.counters_of(t)(1), (10, 20, 30))  # a further device
        t.cuda = self.Nested()
        runtime.counters_of(t)()
        self.assertEqual(t.cuda.calls, 1)


class Templates(unittest.TestCase):
    def test_expand(self):
        self.assertEqual(runtime.expand("{run}-rank{rank}.{step}", run="r", rank=3, step=7),
                         "r-rank3.7")
        with self.assertRaisesRegex(ValueError, "unknown placeholder {bogus}"):
            runtime.expand("x{bogus}")
        with self.assertRaises(ValueError):
            runtime.expand("a/{rank}", rank=1)

    def test_rank_info(self):
        self.assertEqual(runtime.rank_info({}), (0, 0, 1))
        self.assertEqual(runtime.rank_info({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}),
                         (5, 1, 8))
        self.assertEqual(runtime.rank_info({"SLURM_PROCID": "9", "SLURM_LOCALID": "1",
                                            "SLURM_NTASKS": "16"}), (9, 1, 16))
        # torchrun's variables win over Slurm's when both are set
        self.assertEqual(runtime.rank_info({"RANK": "2", "SLURM_PROCID": "9"})[0], 2)


class StepWindow(unittest.TestCase):
    def test_window(self):
        w = runtime.Window(skip=2, record=3)
        self.assertFalse(w.active_at_start())
        self.assertEqual([w.after_step(n) for n in range(1, 7)],
                         [None, "start", None, None, "stop", None])
        self.assertTrue(runtime.Window().active_at_start())
        self.assertEqual([runtime.Window().after_step(n) for n in (1, 100)], [None, None])
        with self.assertRaises(ValueError):
            runtime.Window(-1, 0)


class FurtherDevices(unittest.TestCase):
    """Every visible device is sampled, NVML asked too, for the first three
    steps; then only those the process used: memory reserved there (cuda:1,
    a DataParallel replica) or a CUDA context alone (cuda:2, NVML's figure)."""

    class Cap:
        def __init__(self):
            self.own, self.further = [], []

        def meta(self, k, v):
            pass

        def sample(self, step, *a):
            self.own.append(step)

        def device_sample(self, d, step, phase, alloc, res, peak, used, total, proc):
            self.further.append((step, d, res, proc))

        def step(self, n, optimizer=-1):
            pass

    @staticmethod
    def torch_on_pci_buses():
        """A stand-in torch on cuda:0 whose device d sits on PCI bus d."""
        class Props:
            def __init__(self, d):
                self.pci_domain_id, self.pci_bus_id, self.pci_device_id = 0, d, 0

        class Cuda:
            def current_device(self):
                return 0

            def get_device_properties(self, d):
                return Props(d)

        class Torch:
            cuda = Cuda()
        return Torch()

    def test_found_then_kept(self):
        reserved = {1: 64 << 20}
        rec = runtime.Recorder(runtime.Options({}), torch=self.torch_on_pci_buses(),
                               counters=lambda d=None: (0, reserved.get(d, 0), 0))
        rec.cap, rec.ndevices = self.Cap(), 4
        nvml = runtime._lib.nvml_memory
        runtime._lib.nvml_memory = lambda lib, pci: (
            (1, 2, 500 << 20) if pci.startswith("00000000:02") else (1, 2, runtime._lib.NA))
        try:
            for step in range(5):
                rec.steps = step
                rec.sample("after_forward")
        finally:
            runtime._lib.nvml_memory = nvml
        seen = {}
        for step, d, res, proc in rec.cap.further:
            seen.setdefault(step, []).append(d)
        self.assertEqual(seen, {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3], 3: [1, 2], 4: [1, 2]})
        self.assertIn((4, 2, 0, 500 << 20), rec.cap.further)
        self.assertEqual(rec.device, 0)

    def test_a_device_used_later_is_found(self):
        class Cuda:
            def current_device(self):
                return 0

            def get_device_properties(self, d):
                return None  # no PCI id: no NVML

        class Torch:
            cuda = Cuda()
        state = {"step": 0}
        rec = runtime.Recorder(runtime.Options({}), torch=Torch(),
                               counters=lambda d=None: (0, 8 << 20 if d == 1 and state["step"] >= 10
                                                        else 0, 0))
        rec.cap, rec.ndevices = self.Cap(), 2
        for step in range(60):
            state["step"] = step
            rec.sample("after_forward")
            rec._end_step()
        steps = sorted({s for s, d, _, _ in rec.cap.further if d == 1})
        self.assertEqual(steps, [0, 1, 2] + list(range(runtime.PROBE_EVERY, 60)))

    def test_a_context_made_later_is_found(self):
        """cuda:1 gets a context alone (no memory) at step 10: NVML finds it
        at the next 25-step look, and it is sampled from then on."""
        state = {"step": 0}
        rec = runtime.Recorder(runtime.Options({}), torch=self.torch_on_pci_buses(),
                               counters=lambda d=None: (0, 0, 0))
        rec.cap, rec.ndevices = self.Cap(), 2
        nvml = runtime._lib.nvml_memory
        runtime._lib.nvml_memory = lambda lib, pci: (
            (1, 2, 300 << 20) if pci.startswith("00000000:01") and state["step"] >= 10
            else (1, 2, runtime._lib.NA))
        try:
            for step in range(60):
                state["step"] = step
                rec.sample("after_forward")
                rec._end_step()
        finally:
            runtime._lib.nvml_memory = nvml
        steps = sorted({s for s, d, _, _ in rec.cap.further if d == 1})
        self.assertEqual(steps, [0, 1, 2] + list(range(runtime.PROBE_EVERY, 60)))
        self.assertIn((runtime.PROBE_EVERY, 1, 0, 300 << 20), rec.cap.further)

    def test_a_failing_device_is_dropped_not_the_capture(self):
        class Cuda:
            def current_device(self):
                return 0

            def get_device_properties(self, d):
                raise RuntimeError("no properties")

        class Torch:
            cuda = Cuda()
        calls = []

        def counters(d=None):
            calls.append(d)
            if d == 1:
                raise RuntimeError("invalid device")
            return (0, 64 << 20 if d == 2 else 0, 0)
        rec = runtime.Recorder(runtime.Options({}), torch=Torch(), counters=counters)
        rec.cap, rec.ndevices = self.Cap(), 3
        for step in range(4):
            rec.steps = step
            rec.sample("after_forward")
        self.assertEqual(rec.cap.own, [0, 1, 2, 3])
        self.assertEqual(calls.count(1), 1)  # asked once, then left alone
        self.assertEqual([d for _, d, _, _ in rec.cap.further], [2, 2, 2, 2])


class OtherProcesses(unittest.TestCase):
    """Other processes on the GPU are listed when what NVML counts beside
    this process moves by 32 MiB or more (a worker's context appears, a
    neighbour leaves), not at every sample."""

    class Cap(FurtherDevices.Cap):
        def __init__(self):
            super().__init__()
            self.lists = []

        def processes(self, device, procs):
            self.lists.append((device, procs))

    def test_listed_when_they_change(self):
        rec = runtime.Recorder(runtime.Options({}), torch=FurtherDevices.torch_on_pci_buses(),
                               counters=lambda d=None: (0, 0, 0))
        rec.cap = self.Cap()
        beside = [0, 0, 600, 610, 1200, 1200, 5]  # MiB NVML counts beside this process
        now, listed = [0], []
        nvml, procs = runtime._lib.nvml_memory, runtime._lib.nvml_processes
        runtime._lib.nvml_memory = lambda lib, pci: ((1000 + beside[now[0]]) << 20, 2, 1000 << 20)
        runtime._lib.nvml_processes = lambda lib, pci: listed.append(now[0]) or ("arr", 1)
        try:
            for now[0] in range(len(beside)):
                rec.steps = now[0]
                rec.sample("after_forward")
        finally:
            runtime._lib.nvml_memory, runtime._lib.nvml_processes = nvml, procs
        self.assertEqual(listed, [2, 4, 6])
        self.assertEqual([d for d, _ in rec.cap.lists], [0, 0, 0])

    def test_a_failing_list_never_stops_the_capture(self):
        rec = runtime.Recorder(runtime.Options({}), torch=FurtherDevices.torch_on_pci_buses(),
                               counters=lambda d=None: (0, 0, 0))
        rec.cap = self.Cap()
        calls = []
        nvml, procs = runtime._lib.nvml_memory, runtime._lib.nvml_processes
        runtime._lib.nvml_memory = lambda lib, pci: (2000 << 20, 2, 1000 << 20)

        def broken(lib, pci):
            calls.append(1)
            raise OSError("no /proc")
        runtime._lib.nvml_processes = broken
        try:
            for step in range(3):
                rec.steps = step
                rec.sample("after_forward")
        finally:
            runtime._lib.nvml_memory, runtime._lib.nvml_processes = nvml, procs
        self.assertEqual(rec.cap.own, [0, 1, 2])  # every sample written
        self.assertEqual(len(calls), 1)  # asked once, not again

    def test_worker_role(self):
        class Info:
            id = 3

        class Data:
            get_worker_info = staticmethod(lambda: Info())

        class Utils:
            data = Data()

        class Torch:
            utils = Utils()
        self.assertEqual(runtime.worker_role(Torch()), "DataLoader worker 3")
        Data.get_worker_info = staticmethod(lambda: None)
        self.assertEqual(runtime.worker_role(Torch()), "")
        self.assertEqual(runtime.worker_role(None), "")


class AsyncBackend(unittest.TestCase):
    def test_no_history_under_cudamallocasync_but_samples_go_on(self):
        """torch refuses _record_memory_history with backend:cudaMallocAsync:
        the recorder says so once and keeps sampling; other errors still stop it."""
        class Memory:
            def __init__(self, msg):
                self.msg = msg

            def _record_memory_history(self, **k):
                raise RuntimeError(self.msg)

        class Cuda:
            pass

        class Torch:
            cuda = Cuda()
        Torch.cuda.memory = Memory("cudaMallocAsync does not yet support recordHistory.")
        rec = runtime.Recorder(runtime.Options({}), torch=Torch, counters=None)
        import io
        import contextlib
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rec.start_history()
        self.assertFalse(rec.recording)
        self.assertIn("no allocator history with backend:cudaMallocAsync", err.getvalue())
        self.assertIsNone(rec.dump("exit"))
        Torch.cuda.memory = Memory("something else")
        rec2 = runtime.Recorder(runtime.Options({}), torch=Torch, counters=None)
        with self.assertRaises(RuntimeError):
            rec2.start_history()


class ProfilerYield(unittest.TestCase):
    def test_tracer_gives_cupti_up_once_when_a_profiler_starts(self):
        """torch.profiler's kineto needs CUPTI's one subscriber slot: the
        driver-level tracer is stopped before its first call, once, even
        when the capture itself has stopped, and the call goes through."""
        calls = []

        class Profiler:
            @staticmethod
            def _prepare_profiler(config, acts):
                calls.append(("prepare", config))
                return "prepared"

            @staticmethod
            def _enable_profiler(config, acts):
                calls.append(("enable", config))

        class Autograd:
            profiler = Profiler

        class Torch:
            autograd = Autograd

        class Lib:
            def md_driver_trace_stop(self, why):
                calls.append(("stop", why))
        rec = runtime.Recorder(runtime.Options({}), torch=None, counters=None)
        rec._lib_handle = Lib()
        rec.disabled = True
        runtime.yield_cupti_to_profiler(rec, Torch)
        self.assertEqual(Profiler._prepare_profiler("c", []), "prepared")
        Profiler._enable_profiler("c", [])
        Profiler._prepare_profiler("d", [])
        self.assertEqual(calls, [("stop", b"torch.profiler started"), ("prepare", "c"),
                                 ("enable", "c"), ("prepare", "d")])


class Binding(unittest.TestCase):
    def test_driver_stop_without_a_tracer_is_harmless(self):
        _lib.load().md_driver_trace_stop(b"nothing to stop")

    def test_capture_round_trip(self):
        lib = _lib.load()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rank0.mdcap")
            cap = _lib.CaptureFile(lib, path)
            cap.meta("rank", 0)
            cap.meta("world_size", 1)
            mib = 1 << 20
            cap.sample(-1, "after_input", 100 * mib, 120 * mib, 100 * mib)
            for k in range(4):
                cap.sample(k, "after_forward", 300 * mib, 400 * mib, 310 * mib, 900 * mib,
                           80 << 30)
                cap.sample(k, "after_clear_gradients", (110 + 20 * k) * mib, 400 * mib,
                           310 * mib, 900 * mib, 80 << 30)
                cap.step(k)
            cap.close(0)
            with self.assertRaisesRegex(OSError, "force"):
                _lib.CaptureFile(lib, path)
            out = subprocess.run([MEMDIAG, "diagnose", "--json", path], capture_output=True,
                                 text=True, check=True).stdout
            self.assertIn('"kind":"capture"', out)
            self.assertIn('"between_step_growth_mib":60.0000', out)
            self.assertIn('"kind":"leak"', out)
            self.assertIn('"kind":"non_framework"', out)

    def test_nvml_absent_is_not_an_error(self):
        used, total, proc = _lib.nvml_memory(_lib.load(), "0000:00:00.0")
        self.assertEqual((used, total, proc), (_lib.NA, _lib.NA, _lib.NA))


if __name__ == "__main__":
    unittest.main()
