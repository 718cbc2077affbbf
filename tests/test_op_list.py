"""The op list, libruntime/ops/ops.inc, is the one place an op is declared: the CPU registry and
the CUDA table are generated from it in C. These checks keep what is written by hand in step
with it: the library's registry, the builder's op methods and the sections of docs/ops.md."""
from __future__ import annotations

import re
from pathlib import Path

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
