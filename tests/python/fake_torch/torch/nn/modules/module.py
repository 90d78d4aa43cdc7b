_pre, _post = [], []


class _Handle:
    def __init__(self, lst, fn):
        self.lst, self.fn = lst, fn

    def remove(self):
        if self.fn in self.lst:
            self.lst.remove(self.fn)


def register_module_forward_pre_hook(fn):
    _pre.append(fn)
    return _Handle(_pre, fn)


def register_module_forward_hook(fn):
    _post.append(fn)
    return _Handle(_post, fn)


class Module:
    def __call__(self, *a):
        for h in list(_pre):
            h(self, a)
        out = self.forward(*a)
        for h in _post:
            h(self, a, out)
        return out

    def zero_grad(self, set_to_none=True):
        pass
