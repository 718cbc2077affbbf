"""The op list, libruntime/ops/ops.inc, is the one place an op is declared: the CPU registry and
the CUDA table are generated from it in C. These checks keep what is written by hand in step
with it: the library's registry, the builder's op methods, the sections of docs/ops.md, the
family folder of each op's code and the index of its tests (tests/op_tests.json)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Dict, Set

import pytest

import runtime_py as rt

pytestmark = pytest.mark.core
ROOT = Path(__file__).resolve().parents[1]
OP_LIST = ROOT / "libruntime" / "ops" / "ops.inc"
# Sections of docs/ops.md about more than one op or none.
PROSE_SECTIONS = {"Conventions", "Data movement: shared rules", "Quantized ops: shared rules",
                  "ONNX conformance"}


def listed_ops():
    """(name, symbol, cuda_check, cuda_run) of every RT_OP line, in order."""
    return re.findall(r'^RT_OP\("(\w+)", (\w+), (\w+), (\w+)\)$', OP_LIST.read_text(), re.M)


def test_the_registry_is_the_list_in_its_order():
    names = [name for name, *_ in listed_ops()]
    assert len(names) == len(set(names))
    assert rt.registered_ops() == tuple(names)


def test_every_op_has_cuda_kernels():
    # The CUDA table follows the list; a NULL run would make CUDA methods refuse the op.
    assert [name for name, _, _, run in listed_ops() if run == "NULL"] == []


def test_every_op_has_a_section_in_the_docs_and_every_section_an_op():
    ops = set(rt.registered_ops())
    sections = re.findall(r"^## (.+)$", (ROOT / "docs" / "ops.md").read_text(), re.M)
    documented = {name.strip() for s in sections if s not in PROSE_SECTIONS
                  for name in s.split(",")}
    assert sorted(ops - documented) == []
    assert sorted(documented - ops) == []


def test_the_builder_writes_only_ops_of_the_list():
    source = (ROOT / "runtime_py" / "compiler" / "builder.py").read_text()
    written = set(re.findall(r'self\.(?:call|_binary|_unary_like)\("(\w+)"', source))
    assert written, "no op call found in builder.py: the pattern is out of date"
    assert sorted(written - set(rt.registered_ops())) == []


def test_every_op_has_a_cpu_and_a_cuda_test():
    """tests/op_tests.json (scripts/op_test_index.py, from the ops each test runs) names where
    each op of the list is tested: an op added without tests, or an index left stale, fails."""
    index = json.loads((ROOT / "tests" / "op_tests.json").read_text())
    assert list(index) == [name for name, *_ in listed_ops()]
    untested = [f"{op} ({device})" for op, by in index.items() for device in ("cpu", "cuda")
                if not by[device]]
    assert untested == []


def test_the_tests_the_index_names_exist():
    defined: Dict[str, Set[str]] = {}
    index = json.loads((ROOT / "tests" / "op_tests.json").read_text())
    stale = []
    for by in index.values():
        for test_id in (i for ids in by.values() for i in ids):
            path, _, name = test_id.partition("::")
            name = name.split("[")[0].split("::")[-1]
            if path not in defined:
                source = ROOT / path
                tree = ast.parse(source.read_text()) if source.exists() else ast.Module([], [])
                defined[path] = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            if name not in defined[path]:
                stale.append(test_id)
    assert stale == []


def test_every_op_is_defined_in_one_family_folder():
    """An op's prepare and run live in the operator files of one family (libruntime/ops/<family>/,
    not in its kernels/), so the folder names find it. They are written out, or made by a macro
    whose first argument is the symbol (DEFINE_BINARY_OP(add, ...))."""
    ops_dir = ROOT / "libruntime" / "ops"
    defined = re.compile(r"^rt_status rt_ops__(\w+)_run\(|^[A-Z_]+\((\w+),", re.M)
    where: Dict[str, Set[str]] = {}
    for source in ops_dir.glob("*/*.c"):
        for written, by_macro in defined.findall(source.read_text()):
            where.setdefault(written or by_macro, set()).add(source.parent.name)
    misplaced = {name: sorted(where.get(symbol, ())) for name, symbol, *_ in listed_ops()
                 if len(where.get(symbol, ())) != 1}
    assert misplaced == {}
