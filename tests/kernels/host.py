"""The fused kernels run on the CPU: each source compiled by the host's C++ compiler against
``cuda_shim.h`` with one thread a block (THREADS 1, COLUMNS 1: a block's sums and maxima are
then its one thread's loop, the same equations), the blocks looped over by the host, called
through ctypes on NumPy arrays (float16 as the shim's, NumPy's bits). What this cannot run is
the GPU's threads working together: 256 summing a row as a tree, or a layer norm's column sums
dealt among 8 groups of rows."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from scratchpar.kernels import cuda

SHIM = Path(__file__).with_name("cuda_shim.h")
COMPILER = shutil.which("g++") or shutil.which("clang++")
SCALARS = {"int": ctypes.c_int, "long long": ctypes.c_longlong, "float": ctypes.c_float,
           "double": ctypes.c_double, "unsigned long long": ctypes.c_ulonglong}
DECLARED = {"float64": "double", "float32": "float", "uint64": "unsigned long long",
            "int64": "long long", "bool": "bool"}


def build(source: str, folder: Path) -> ctypes.CDLL:
    folder.mkdir(parents=True, exist_ok=True)
    code, library = folder / "kernel.cpp", folder / "kernel.so"
    code.write_text(f'#define THREADS 1\n#define COLUMNS 1\n#include "{SHIM}"\n{source}')
    done = subprocess.run([COMPILER, "-std=c++17", "-O1", "-ffp-contract=off", "-shared", "-fPIC",
                           "-o", str(library), str(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(library))


def _params(signature: str, types: dict[str, str]) -> list[tuple[str, str]]:
    """(C type, name) of each parameter of a template's ``signature``, its template parameters
    (T, W) as ``types`` says."""
    signature = signature.replace("typename Acc<T>::type",
                                  "double" if types["T"] == "double" else "float")
    for placeholder, ctype in types.items():
        signature = re.sub(rf"\b{placeholder}\b", ctype, signature)
    return [(p.rsplit(None, 1)[0], p.rsplit(None, 1)[1])
            for p in (" ".join(p.split()) for p in signature.split(","))]


def _argtype(ctype: str):
    return ctypes.c_void_p if "*" in ctype else SCALARS[ctype.replace("const ", "")]


def block_kernel(module, name: str, ctype: str | tuple[str, str], folder: Path):
    """``run(blocks, *args)``: ``module``'s kernel ``name`` for ``ctype`` (T, or (T, W)), its
    blocks in turn (arrays passed as NumPy arrays, scalars as Python numbers)."""
    source = cuda.PREAMBLE.replace("#include <cuda_fp16.h>", "") + module.SOURCE
    signature = re.search(rf"__global__ void {name}\((.*?)\)\s*{{", module.SOURCE, re.S)[1]
    types = dict(zip("TW", (ctype,) if isinstance(ctype, str) else ctype))
    params = _params(signature, types)
    source += (f'extern "C" void run(int blocks, {", ".join(f"{t} {n}" for t, n in params)}) {{\n'
               f"    for (int b = 0; b < blocks; ++b) {{\n"
               f"        blockIdx.x = b; threadIdx.x = 0;\n"
               f"        {name}<{', '.join(types.values())}>"
               f"({', '.join(n for _, n in params)});\n    }}\n}}\n")
    function = build(source, folder / f"{module.__name__}.{name}.{'.'.join(types.values())}").run
    function.argtypes = [ctypes.c_int] + [_argtype(t) for t, _ in params]
    return lambda blocks, *args: function(blocks, *(_pass(a) for a in args))


def pointwise(kernel: cuda.Pointwise, ctype: str, folder: Path):
    """``run(n, *args)``: the elementwise ``kernel`` over n elements as CuPy runs it, T as
    ``ctype``: a T or bool parameter is an array, any other a scalar."""
    params = []
    for part, out in ((kernel.inputs, False), (kernel.outputs, True)):
        for declared in part.split(","):
            kind, name = declared.split()
            params.append((ctype if kind == "T" else DECLARED[kind], name, out,
                           kind in ("T", "bool")))
    signature = ", ".join(f"{t}* {n}_" if array else f"{t} {n}_" for t, n, _, array in params)
    take = "\n".join(f"{t}& {n} = {n}_[i];" if out else
                     f"const {t} {n} = {n}_[i];" if array else f"const {t} {n} = {n}_;"
                     for t, n, out, array in params)
    source = (cuda.POINTWISE + f'extern "C" void run(long long n, {signature}) {{\n'
              f"    typedef {ctype} T;\n    for (ptrdiff_t i = 0; i < n; ++i) {{\n{take}\n"
              f"{kernel.body}\n    }}\n}}\n")
    function = build(source, folder / f"{kernel.name}.{ctype}").run
    function.argtypes = [ctypes.c_longlong] + [
        ctypes.c_void_p if array else SCALARS[t] for t, _, _, array in params]
    return lambda n, *args: function(n, *(_pass(a) for a in args))


def _pass(a):
    """An array's address (it must be C-contiguous), or a scalar as a Python number."""
    if isinstance(a, np.ndarray):
        assert a.flags.c_contiguous
        return a.ctypes.data
    return a.item() if isinstance(a, np.generic) else a
