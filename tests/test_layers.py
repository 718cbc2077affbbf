"""runtime_py is three layers that import downwards only: the runtime (the modules at the top
of the package), the compiler (compiler/) and the importers (onnx/, executorch/). The package's
__init__ and the command line (__main__) sit above them all. These checks read the imports of
every module, lazy ones inside functions included, so a new upward import or a cycle fails
here rather than as an ImportError in some user's process."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

pytestmark = pytest.mark.core
PACKAGE = Path(__file__).resolve().parents[1] / "runtime_py"
LAYERS = {"runtime": 0, "compiler": 1, "importer": 2, "facade": 3}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module in ("runtime_py", "runtime_py.__main__"):
        return "facade"
    if parts[1] == "compiler":
        return "compiler"
    if parts[1] in ("onnx", "executorch"):
        return "importer"
    return "runtime"


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(module: str, path: Path, top_level_only: bool = False) -> Set[str]:
    """The runtime_py modules `module` imports (`from . import x` names module x, `from .x
    import y` module x, or x.y where that is a module)."""
    known = modules()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found: Set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("runtime_py"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("runtime_py"))
    found.discard(module)
    return found


def test_the_layers_are_where_the_readme_says():
    layers = {layer_of(m) for m in modules()}
    assert layers == set(LAYERS)
    assert "runtime_py.compiler.builder" in modules()
    assert layer_of("runtime_py.program") == "runtime"


def test_every_import_goes_down_or_stays_in_its_layer():
    upward: List[str] = []
    for module, path in modules().items():
        for target in imports_of(module, path):
            if LAYERS[layer_of(target)] > LAYERS[layer_of(module)]:
                upward.append(f"{module} ({layer_of(module)}) imports {target} "
                              f"({layer_of(target)})")
    assert upward == []


def test_one_importer_does_not_import_the_other():
    crossing = [f"{m} imports {t}" for m, p in modules().items() if layer_of(m) == "importer"
                for t in imports_of(m, p) if layer_of(t) == "importer"
                and t.split(".")[1] != m.split(".")[1]]
    assert crossing == []


def test_no_cycle_among_module_level_imports():
    graph = {m: imports_of(m, p, top_level_only=True) for m, p in modules().items()}
    state: Dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: List[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_importers_are_found_through_the_registry():
    import runtime_py as rt
    from runtime_py import _importers

    names = {i.name: i.module for i in _importers.registered()}
    assert names == {"ExecuTorch": "runtime_py.executorch", "ONNX": "runtime_py.onnx"}
    assert rt is not None
    head = b"\x00\x00\x00\x00ET12" + bytes(8)
    assert _importers.importer_for(head).name == "ExecuTorch"
    assert _importers.importer_for(b"\x08\x07" + bytes(14)).name == "ONNX"
    assert _importers.importer_for(b"\x89RTP\r\n\x1a\n" + bytes(8)) is None
