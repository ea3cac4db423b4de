"""The fused kernels' CUDA sources type-check on the CPU: every template of each block-per-row
kernel instantiated for double, float and float16, and each elementwise kernel's body as CuPy
wraps it, compiled by the host's C++ compiler against a shim of CUDA's few names
(``cuda_shim.h``). A GPU compiles them for real (``--device cuda``, docs/devices.md); this
catches a type or a name wrong in a kernel edited where no GPU is."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scratchpar.kernels import cross_entropy, cuda, dropout, gelu, layer_norm, softmax

SHIM = Path(__file__).with_name("cuda_shim.h")
CTYPES = {"T": "T", "float64": "double", "float32": "float", "uint64": "unsigned long long",
          "int64": "long long", "bool": "bool"}
compiler = shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(compiler is None, reason="no C++ compiler on this machine")


def type_check(source: str, tmp_path) -> None:
    path = tmp_path / "kernel.cpp"
    path.write_text(f'#include "{SHIM}"\n{source}')
    done = subprocess.run([compiler, "-std=c++17", "-fsyntax-only", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", [layer_norm, softmax, cross_entropy],
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_block_per_row_kernel_type_checks_for_every_dtype(module, tmp_path):
    source = cuda.PREAMBLE.replace("#include <cuda_fp16.h>", "") + module.SOURCE
    for name in module.TEMPLATES:
        signature = re.search(rf"__global__ void {name}\((.*?)\)\s*{{", module.SOURCE, re.S)[1]
        for ctype in cuda.CTYPES.values():
            params = re.sub(r"\bT\b", ctype, signature)
            source += f"template void {name}<{ctype}>({params});\n"
    type_check(source, tmp_path)


@pytest.mark.parametrize("kernel", [gelu.FORWARD, gelu.BACKWARD, dropout.FORWARD,
                                    dropout.BACKWARD], ids=lambda k: k.name)
@pytest.mark.parametrize("ctype", ["double", "float", "float16"])
def test_each_elementwise_kernel_type_checks_for_every_dtype(kernel, ctype, tmp_path):
    lines = [f"void body(ptrdiff_t i) {{ typedef {ctype} T;"]
    for declared in kernel.inputs.split(","):
        kind, name = declared.split()
        lines.append(f"const {CTYPES[kind]} {name} = {{}};")
    for declared in kernel.outputs.split(","):
        kind, name = declared.split()
        lines.append(f"{CTYPES[kind]} {name}_held{{}}; {CTYPES[kind]}& {name} = {name}_held;")
    type_check(cuda.POINTWISE + "\n".join(lines) + kernel.body + "}\n", tmp_path)
