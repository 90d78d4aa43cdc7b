_pre, _post = [], []


def register_optimizer_step_pre_hook(fn):
    _pre.append(fn)


def register_optimizer_step_post_hook(fn):
    _post.append(fn)


class Optimizer:
    def step(self, closure=None):
        for h in _pre:
            h(self, (), {})
        if closure is not None:  # PyTorch Lightning's way: forward and backward inside
            closure()
        self._step()
        for h in _post:
            h(self, (), {})

    def _step(self):
        pass

    def zero_grad(self, set_to_none=True):
        pass
