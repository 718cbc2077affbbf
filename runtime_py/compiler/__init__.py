"""The compiler: author programs and write them as files the library loads.

    from runtime_py.compiler import ProgramBuilder

builder.py is the authoring API (ProgramBuilder, MethodBuilder, Value); shapes.py holds the
ops' output-shape rules, planner.py places tensors in one arena, writer.py serializes the
format (docs/format.md) and datafile.py reads and writes `.rtd` data files. The compiler
imports from the runtime layer (dtypes, errors, value kinds) and never from the importers,
which sit above it.
"""
from __future__ import annotations

from .builder import MethodBuilder, ProgramBuilder, Value

__all__ = ["MethodBuilder", "ProgramBuilder", "Value"]
