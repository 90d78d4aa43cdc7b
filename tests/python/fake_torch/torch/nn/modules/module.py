_pre, _post = [], []


def register_module_forward_pre_hook(fn):
    _pre.append(fn)


def register_module_forward_hook(fn):
    _post.append(fn)


class Module:
    def __call__(self, *a):
        for h in _pre:
            h(self, a)
        out = self.forward(*a)
        for h in _post:
            h(self, a, out)
        return out

    def zero_grad(self, set_to_none=True):
        pass
