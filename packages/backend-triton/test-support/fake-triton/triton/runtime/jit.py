import inspect
import re
import textwrap


class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        params = list(inspect.signature(fn).parameters.values())
        self.arg_names = [p.name for p in params]
        self.constexprs = [i for i, p in enumerate(params) if "constexpr" in str(p.annotation)]
        src = textwrap.dedent(inspect.getsource(fn))
        self.src = src[re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE).start():]
        self.__name__ = fn.__name__


def jit(fn=None, **kwargs):
    if fn is None:
        return lambda f: JITFunction(f)
    return JITFunction(fn)
