"""A stand-in for torch with just the names the PyTorch candidate worker touches before it serves, so the tests of
its startup errors (a candidate that does not import, has no class, the wrong signature) run where torch is not
installed. It computes nothing."""
__version__ = "0.0+fake"


def set_grad_enabled(flag):
    return None


class Tensor:
    def copy_(self, other):
        return self


class _Module:
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def load_state_dict(self, state, strict=True):
        return None

    def __init__(self, *args, **kwargs):
        pass


class nn:
    Module = _Module


class _Event:
    def __init__(self, enable_timing=False):
        pass

    def record(self, stream=None):
        pass

    def elapsed_time(self, other):
        return 0.0


class cuda:
    Event = _Event

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def current_stream(device=None):
        return None
