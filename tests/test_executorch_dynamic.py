"""ExecuTorch programs with dynamic shapes: one converted program per model runs every shape.

tests/data/dynamic_pte holds the transformers families of tests/data/dynamic exported by
torch.export with dynamic batch and sequence dimensions and lowered by ExecuTorch 1.5 to
portable kernels (scripts/export_dynamic_pte.py), with torch eager's outputs at three shapes.
Their SymInt arithmetic (sym_size, executorch_prim ops), views / expands / aranges with
run-time sizes and multi-tensor indexing are what the importer must carry to run time.
"""
import json
import os

import pytest

np = pytest.importorskip("numpy")

import runtime_py as rt  # noqa: E402
from runtime_py import executorch as et  # noqa: E402
from runtime_py.errors import InvalidArgument  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "dynamic_pte")
ATOL = 1e-4


def _entries():
    path = os.path.join(DATA, "manifest.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [e for e in json.load(f) if "error" not in e]


ENTRIES = _entries()


def case(entry, k):
    """(inputs in order, expected outputs) of case k."""
    with np.load(os.path.join(DATA, entry["file"].replace(".pte", ".npz"))) as npz:
        inputs = [npz[f"case{k}_in_{i}"] for i in range(len(entry["inputs"]))]
        count = sum(1 for key in npz.files if key.startswith(f"case{k}_out_"))
        outputs = [npz[f"case{k}_out_{j}"] for j in range(count)]
    return inputs, outputs


@pytest.fixture(scope="module", params=ENTRIES, ids=lambda e: e["file"])
def converted(request):
    entry = request.param
    program = rt.Program.load(et.convert(os.path.join(DATA, entry["file"])))
    method = program.load_method("forward")
    yield entry, program, method
    method.close()
    program.close()


def test_every_shape_matches_torch(converted):
    entry, _, method = converted
    shapes = set()
    for k in range(entry["cases"]):
        inputs, want = case(entry, k)
        got = method(*inputs)
        assert len(got) == len(want)
        for j, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape, (k, j, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=0, atol=ATOL, err_msg=f"case {k} output {j}")
        shapes.add(tuple(inputs[0].shape))
    assert len(shapes) == entry["cases"]


def test_a_size_beyond_the_programs_bound_is_refused(converted):
    entry, program, method = converted
    inputs, _ = case(entry, 0)
    info = program.method_meta("forward").inputs[0]
    assert info.dynamic
    shape = list(inputs[0].shape)
    shape[0] = info.shape[0] + 1
    with pytest.raises(InvalidArgument, match="at most"):
        method(np.resize(inputs[0], shape), *inputs[1:])
    method(*inputs)  # still usable
