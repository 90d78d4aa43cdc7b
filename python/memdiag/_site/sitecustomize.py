"""memdiag's sitecustomize, put first on PYTHONPATH by `memdiag run`.

It runs the user's own sitecustomize (the next one on sys.path) first, so
nothing the job relied on changes, then arms memdiag for the moment torch
is imported. Processes that never import torch are untouched.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize():
    path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_memdiag_user_sitecustomize"] = mod
    spec.loader.exec_module(mod)


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Lets torch import normally, then attaches memdiag to it."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            try:
                from memdiag import runtime
                runtime.attach(module)
            except Exception as e:  # never break the user's job
                print(f"memdiag: capture disabled: {e}", file=sys.stderr)
        loader.exec_module = exec_module
        return spec


_chain_user_sitecustomize()
if os.environ.get("MEMDIAG_OUT"):
    sys.meta_path.insert(0, _TorchWatcher())
