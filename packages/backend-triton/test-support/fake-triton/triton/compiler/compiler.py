import ast
import collections
import os
import time

from ..runtime.errors import OutOfResources
from ..runtime.jit import JITFunction
from .errors import CompilationError


class ASTSource:
    def __init__(self, fn, signature, constexprs=None, attrs=None):
        for k in signature:
            if not isinstance(k, str):
                raise TypeError("Signature keys must be string")
        self.fn = fn
        self.signature = signature
        self.constants = dict(constexprs or {})
        self.attrs = dict(attrs or {})


KernelMetadata = collections.namedtuple(
    "KernelMetadata",
    ["name", "shared", "num_warps", "num_stages", "num_ctas", "cluster_dims", "global_scratch_size", "global_scratch_align",
     "profile_scratch_size", "profile_scratch_align", "launch_cooperative_grid", "launch_pdl", "target", "triton_version"],
)


class CompiledKernel:
    def __init__(self, asm, metadata):
        self.asm = asm
        self.metadata = metadata
        self.name = metadata.name


PTX_TYPE = {"i1": ".u8", "i8": ".u8", "i16": ".u16", "i32": ".u32", "i64": ".u64", "u32": ".u32", "u64": ".u64",
            "fp16": ".b16", "bf16": ".b16", "fp32": ".f32", "fp64": ".f64"}


def _check(jit):
    tree = ast.parse(jit.src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id.startswith("undefined"):
            raise CompilationError(jit.src, node, "NameError(\"Cannot access global variable %s from within @jit'ed function.\")" % node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            callee = jit.fn.__globals__.get(node.func.id)
            if isinstance(callee, JITFunction):
                try:
                    _check(callee)
                except Exception as e:
                    raise CompilationError(jit.src, node, None) from e


def compile(src, target=None, options=None):
    options = options or {}
    jit = src.fn
    _check(jit)
    if jit.__name__ == "slow_kernel":
        time.sleep(30)
    if jit.__name__ == "crash_kernel":
        os._exit(3)
    if options.get("num_warps") == 32:
        raise OutOfResources(300000, 232448, "shared memory")
    print("fake triton: compiling %s (this line must not reach the protocol)" % jit.__name__)
    os.write(1, b"raw fd 1 noise\n")
    name = jit.__name__
    params = []
    for n in jit.arg_names:
        t = src.signature[n]
        if t == "constexpr":
            continue
        i = len(params)
        params.append(".param .u64 .ptr .global .align 1 %s_param_%d" % (name, i) if t.startswith("*") else ".param %s %s_param_%d" % (PTX_TYPE[t], name, i))
    for _ in range(2):
        params.append(".param .u64 .ptr .global .align 1 %s_param_%d" % (name, len(params)))
    ptx = "//\n.version 8.7\n.target sm_90a\n.address_size 64\n\n.visible .entry %s(\n\t%s\n)\n.reqntid %d, 1, 1\n{\n\tret;\n}\n" % (
        name, ",\n\t".join(params), 32 * options.get("num_warps", 4))
    md = KernelMetadata(name=name, shared=1024 * options.get("num_stages", 3), num_warps=options.get("num_warps", 4),
                        num_stages=options.get("num_stages", 3), num_ctas=1, cluster_dims=(1, 1, 1), global_scratch_size=0,
                        global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1, launch_cooperative_grid=False,
                        launch_pdl=False, target=target, triton_version="3.6.0+fake")
    return CompiledKernel({"ptx": ptx, "cubin": b"\x7fELF" + bytes(60), "ttir": "module {}"}, md)
