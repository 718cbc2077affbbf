"""Import ExecuTorch programs (.pte), with no executorch, torch or flatbuffers needed.

    program_bytes = runtime_py.executorch.convert("model.pte")
    module = runtime_py.executorch.load("model.pte")
    (y,) = module.forward(x)

`runtime_py.load("model.pte")` does the same, choosing this importer by the file's header.
Supported operators: `supported_ops()`; docs/executorch.md has the mapping and the limits.
"""
from __future__ import annotations

from typing import Any

from ..compiler import ProgramBuilder
from ..module import Module
from ._convert import build, supported_ops
from ._errors import ConversionError, MalformedPte
from ._program import is_pte

__all__ = ["convert", "load", "build", "is_pte", "supported_ops", "ConversionError",
           "MalformedPte"]


def convert(source: Any, *, bundled_cases: Any = (), external_data: Any = None) -> bytes:
    """Convert a .pte program (a path, or its bytes) into program bytes of ours.

    bundled_cases: (method, inputs, expected_outputs) triples stored in the program as test
    cases (Method.verify_bundled, `python -m runtime_py verify`); the expected outputs must
    come from the reference, typically torch's outputs recorded at export time.
    external_data: a data file path (.rtd) the weights are written to instead of the program.

    Raises MalformedPte (an InvalidProgram) for bytes that are not a well-formed ExecuTorch
    program, naming the byte offset and the table and field, and ConversionError (an
    Unsupported) for a delegate, an operator or a dtype the runtime cannot run, naming the
    method, the instruction index and the operator."""
    builder: ProgramBuilder = build(source)
    for method, inputs, expected in bundled_cases:
        builder.add_bundled_case(method, inputs, expected)
    return builder.to_bytes(external_data=external_data)


def load(source: Any, **method_options: Any) -> Module:
    """Convert a .pte program and load it as a Module (one method per execution plan)."""
    return Module(convert(source), **method_options)
