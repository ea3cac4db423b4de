"""The package's imports, read from its source, follow DESIGN §1's layers and close no circle."""

import ast
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "scratchpar"
TRACE = ("scratchpar.trace.tracer", "scratchpar.trace.chrome")  # stdlib only; any layer's

# DESIGN §1 from the bottom up: (layer, names directly under scratchpar/, "" for the package root).
# A module may import its own layer and the layers before it.
LAYERS = (
    ("double/", ("double",)),
    ("backend.py", ("", "backend", "mps", "allocator", "table")),
    ("device_rng.py scatter.py peak.py timing.py kernels/",
     ("device_rng", "scatter", "peak", "timing", "kernels")),
    ("autograd/", ("autograd",)),
    ("nn/ optim/", ("nn", "optim")),
    ("comm/", ("comm",)),
    ("data/", ("data",)),
    ("parallel/", ("parallel",)),
    ("train/", ("train", "sample", "evaluate", "checkpoint")),
    ("plan/", ("plan",)),
    ("jobs/ trace/ bench/ batch/", ("jobs", "trace", "bench", "batch")),
)
APART = {"bench": "batch", "batch": "bench"}  # siblings in a layer: neither imports the other
PLACE = {name: (rank, layer) for rank, (layer, names) in enumerate(LAYERS) for name in names}
ONLY = {"comm/": ("backend.py",)}  # the layers below it that §1 narrows a layer to


class Import(NamedTuple):
    where: str  # file:line
    importer: str
    target: str  # the module imported, else the package it was imported from


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_imports(root: Path) -> list[Import]:
    """Every import in every module under ``root/scratchpar``, at any depth of its code."""
    modules = {module_name(path, root): path for path in sorted((root / PACKAGE).rglob("*.py"))}
    found = []
    for importer, path in modules.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                anchor = package.rsplit(".", node.level - 1)[0] if node.level else ""
                base = ".".join(filter(None, (anchor, node.module)))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            found += [Import(where, importer, target) for target in dict.fromkeys(targets)]
    return found


def place(module: str) -> tuple[int, str] | None:
    return PLACE.get(module.split(".")[1] if "." in module else "")


def broken_rule(imp: Import) -> str | None:
    """The rule of DESIGN §1 that ``imp`` goes against, if any."""
    top = imp.target.partition(".")[0]
    if imp.importer in TRACE:
        return None if top in sys.stdlib_module_names else \
            "trace/tracer.py and trace/chrome.py import the standard library only"
    if place(imp.importer) is None:
        return f"{imp.importer} is in no layer of the table"
    rank, layer = place(imp.importer)
    if top == "mpi4py" and layer != "comm/":
        return "only comm/ imports mpi4py"
    if top != PACKAGE or imp.target in TRACE:
        return None
    if place(imp.target) is None:
        return f"{imp.target} is in no layer of the table"
    their_rank, theirs = place(imp.target)
    mine, target = imp.importer.split(".")[1], imp.target.split(".")[1]
    if APART.get(mine) == target:
        return f"{mine}/ and {target}/ are siblings: neither imports the other"
    if theirs != layer and theirs not in ONLY.get(layer, (theirs,)):
        return f"{layer} imports only {', '.join(ONLY[layer])} (and trace/tracer.py)"
    return f"{layer} imports {theirs}, a layer above it" if their_rank > rank else None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def shortest_loop(graph: dict[str, set[str]], start: str) -> list[str]:
    """The shortest path of imports from ``start``, which lies on a circle, back to it."""
    parent, todo = {start: None}, [start]
    for node in todo:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                loop = [start]
                while node is not None:
                    loop.append(node)
                    node = parent[node]
                return loop[::-1]
            if nxt not in parent:
                parent[nxt] = node
                todo.append(nxt)


def circles(imports: list[Import]) -> list[str]:
    """Each circle of imports inside the package: one loop around it, then every import on it."""
    graph = {}
    for imp in imports:
        if imp.target.partition(".")[0] == PACKAGE:
            graph.setdefault(imp.importer, set()).add(imp.target)
    reach = {module: reachable(graph, module) for module in graph}
    found = {frozenset(m for m in reach[n] if n in reach.get(m, ()))
             for n in reach if n in reach[n]}
    return ["circle " + " → ".join(shortest_loop(graph, min(circle))) + "".join(
                f"\n    {imp.where} → {imp.target}" for imp in imports
                if imp.importer in circle and imp.target in circle)
            for circle in sorted(found, key=min)]


def layer_breaches(imports: list[Import]) -> list[str]:
    return [f"{imp.where} → {imp.target}: {rule}" for imp in imports if (rule := broken_rule(imp))]


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return read_imports(ROOT)


def test_imports_go_down_the_layers(imports):
    """Every import, at module level or inside a function or an ``if TYPE_CHECKING`` block, goes
    to its own layer or one before it in LAYERS, DESIGN §1's list read from the bottom up.

    §1 narrows the order in three places: ``comm/`` imports only ``backend.py`` (and
    ``trace/tracer.py``); ``trace/tracer.py`` and ``trace/chrome.py`` import the standard
    library only, and every layer may import them; only ``comm/`` imports ``mpi4py``. The rest
    of §1 follows from the order: ``data/`` never imports ``parallel/``, and ``autograd/``,
    ``nn/``, ``optim/`` import neither ``comm/`` nor (by the mpi4py rule) MPI. A module in no row
    of LAYERS fails until it gets one.

    Readings where §1 is silent. The double stands where CuPy stands, under ``backend.py``,
    which picks between NumPy, CuPy and it. ``allocator.py`` (stdlib only, called first by the
    entry points) and the package root (a version string) share ``backend.py``'s floor, so
    ``comm/`` may import them too. The rest of ``trace/`` and ``scratchpar.trace`` itself are
    the top.
    """
    broken = layer_breaches(imports)
    assert not broken, "imports against DESIGN §1's layers:\n" + "\n".join(broken)


def test_imports_close_no_circle(imports):
    """The graph of every import (function-level ones too) from a module to the module or
    package it names has no cycle; a package importing its submodules is an ordinary edge."""
    found = circles(imports)
    assert not found, "circles of imports:\n" + "\n".join(found)


def test_the_checker_reports_a_breach_and_a_circle(tmp_path):
    files = {
        "__init__.py": "",
        "comm/__init__.py": "",
        "comm/bad.py": "from ..parallel import dp\n",
        "nn/mlp.py": "def f():\n    from mpi4py import MPI\n",
        "parallel/__init__.py": "",
        "parallel/dp.py": "def f():\n    from scratchpar.parallel import hybrid\n",
        "parallel/hybrid.py": "from . import dp\n",
    }
    for name, text in files.items():
        (tmp_path / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / PACKAGE / name).write_text(text)
    imports = read_imports(tmp_path)
    assert layer_breaches(imports) == [
        "scratchpar/comm/bad.py:1 → scratchpar.parallel.dp: "
        "comm/ imports only backend.py (and trace/tracer.py)",
        "scratchpar/nn/mlp.py:2 → mpi4py: only comm/ imports mpi4py",
    ]
    assert circles(imports) == [
        "circle scratchpar.parallel.dp → scratchpar.parallel.hybrid → scratchpar.parallel.dp"
        "\n    scratchpar/parallel/dp.py:2 → scratchpar.parallel.hybrid"
        "\n    scratchpar/parallel/hybrid.py:1 → scratchpar.parallel.dp"]
