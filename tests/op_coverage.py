"""A pytest plugin that records which ops each test runs: `pytest -p tests.op_coverage` with
RT_OP_COVERAGE_OUT=FILE writes {op: {device: [test ids]}} at the end of the session, from the
instructions of every method a test loads. scripts/op_test_index.py uses it to write
tests/op_tests.json, the index of where each op of the op list is tested."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Set

from runtime_py.program import Program

_seen: Dict[str, Dict[str, Set[str]]] = {}
_current: Dict[str, Optional[str]] = {"test": None}
_load_method = Program.load_method


def _recording_load_method(self: Program, name: str = "forward", **options: Any) -> Any:
    method = _load_method(self, name, **options)
    test = _current["test"]
    if test is not None:
        device = "cuda" if str(options.get("device", "cpu")).startswith("cuda") else "cpu"
        for op in self.instruction_ops(name):
            if op is not None:
                _seen.setdefault(op, {}).setdefault(device, set()).add(test)
    return method


def pytest_configure(config: Any) -> None:
    Program.load_method = _recording_load_method  # type: ignore[method-assign]


def pytest_runtest_setup(item: Any) -> None:
    _current["test"] = item.nodeid


def pytest_runtest_teardown(item: Any) -> None:
    _current["test"] = None


def pytest_sessionfinish(session: Any) -> None:
    Program.load_method = _load_method  # type: ignore[method-assign]
    out = os.environ.get("RT_OP_COVERAGE_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({op: {d: sorted(ids) for d, ids in by.items()} for op, by in _seen.items()},
                      f, indent=1, sort_keys=True)
