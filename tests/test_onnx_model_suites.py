"""The ONNX backend test suites of whole models (simple, pytorch-converted, pytorch-operator),
each case converted, loaded and run on its data sets as `python -m runtime_py.onnx.conformance`
runs it: a case must match onnx's expected outputs or be refused cleanly (then it is skipped
with the refusal); wrong numbers, a library error or a converter crash fail."""
from __future__ import annotations

import pytest

pytest.importorskip("numpy")
pytest.importorskip("onnx")

from runtime_py.onnx.conformance import load_cases, run_case  # noqa: E402

MODEL_SUITES = ("simple", "pytorch-converted", "pytorch-operator")
CASES = {(suite, case.name): case for suite in MODEL_SUITES for case in load_cases(suite)}


@pytest.mark.parametrize("suite,name", sorted(CASES), ids=lambda v: v)
def test_model_suite_case(suite, name):
    status, detail = run_case(CASES[suite, name])
    if status == "unsupported":
        pytest.skip(f"unsupported: {detail[:300]}")
    assert status == "passed", f"{status}: {detail}"
