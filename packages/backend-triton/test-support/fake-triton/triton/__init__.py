"""A stand-in for the `triton` package, for CPU tests of the real compile helper (fk_triton_compile.py).

It mirrors the parts of Triton 3.6's Python API the helper uses: triton.jit / JITFunction (arg_names,
constexprs, src starting at the `def`), triton.compiler.ASTSource, triton.compile(src, target=, options=)
returning an object with .asm (ptx, cubin) and .metadata (a namedtuple), CompilationError (src, node,
error_message; callee errors chained with `from`), and GPUTarget. compile() does not generate code: it
reports a CompilationError at any name starting with `undefined`, sleeps for a kernel named slow_kernel,
kills the process for crash_kernel, raises OutOfResources for num_warps=32, prints noise on stdout, and
otherwise emits a PTX prototype with Triton 3.6's parameter list (runtime args + 2 scratch pointers).
"""
__version__ = "3.6.0+fake"

from . import language  # noqa: E402,F401
from .runtime.jit import JITFunction, jit  # noqa: E402,F401
from .compiler.compiler import compile  # noqa: E402,F401
