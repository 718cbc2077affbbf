"""The dynamic-axis exports of tests/data/dynamic (ONNX) and tests/data/dynamic_pte (ExecuTorch)
on CUDA: one program per model, loaded once on the device and run at every shape of its cases,
against the references the CPU tests (tests/test_onnx_dynamic.py,
tests/test_executorch_dynamic.py) use."""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.gpu
np = pytest.importorskip("numpy")
pytest.importorskip("onnx")

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402
from tests.test_executorch_dynamic import DATA as PTE_DATA  # noqa: E402
from tests.test_executorch_dynamic import ENTRIES as PTE_ENTRIES  # noqa: E402
from tests.test_executorch_dynamic import case as pte_case  # noqa: E402
from tests.test_onnx_dynamic import ATOL, DATA, ENTRIES, _bounds, _case  # noqa: E402


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_every_shape_matches_onnxruntime_on_cuda(entry):
    program = ro.load(os.path.join(DATA, entry["file"]), dynamic_bounds=_bounds(entry)).program
    names = [info.name for info in program.method_meta("forward").inputs]
    with program.load_method("forward", device="cuda") as method:
        for k in range(entry["cases"]):
            inputs, want = _case(entry, k)
            got = method(*[inputs[n] for n in names])
            assert len(got) == len(want)
            for i, (g, w) in enumerate(zip(got, want)):
                g = np.asarray(g.to_host())
                assert g.shape == w.shape, (k, i, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=0, atol=ATOL,
                                           err_msg=f"case {k} output {i}")


@pytest.mark.parametrize("entry", PTE_ENTRIES, ids=lambda e: e["file"])
def test_every_shape_of_a_dynamic_pte_matches_torch_on_cuda(entry):
    from runtime_py import executorch as et

    program = rt.Program.load(et.convert(os.path.join(PTE_DATA, entry["file"])))
    with program.load_method("forward", device="cuda") as method:
        for k in range(entry["cases"]):
            inputs, want = pte_case(entry, k)
            got = method(*inputs)
            for j, (g, w) in enumerate(zip(got, want)):
                np.testing.assert_allclose(np.asarray(g.to_host()), w, rtol=0, atol=ATOL,
                                           err_msg=f"case {k} output {j}")
