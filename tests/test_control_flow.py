"""If, Loop and Scan lowered onto jumps (runtime_py/onnx/_lowerings/control.py): handmade
models against onnxruntime, the clean refusals, and the copy_into / assign ops they use."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402
from runtime_py.errors import Error  # noqa: E402

F, I64, B = TP.FLOAT, TP.INT64, TP.BOOL


def vi(name, dtype, shape):
    return oh.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.float32):
    return oh.make_node("Constant", [], [name],
                        value=onnx.numpy_helper.from_array(np.asarray(value, dtype), name))


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = oh.make_graph(nodes, "g", inputs, outputs, list(inits))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def compare(m, feeds: Dict[str, np.ndarray], **options) -> List[np.ndarray]:
    """Run with onnxruntime and with the runtime; the outputs must agree in shape, dtype and
    value. Returns ours."""
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    module = ro.load(m, **options)
    try:
        got = [np.array(y) for y in module(*feeds.values())]
    finally:
        module.close()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


# ---- If ---------------------------------------------------------------------------------------

def if_model(then_shape=(3,), else_slice=False):
    """res = cond ? (x + y, x) : (x * 2, -x), the branches reading outer names."""
    then_b = oh.make_graph([oh.make_node("Add", ["x", "y"], ["t0"]),
                            oh.make_node("Identity", ["x"], ["t1"])], "then", [],
                           [vi("t0", F, None), vi("t1", F, None)])
    else_nodes = [const("two", 2.0), oh.make_node("Mul", ["x", "two"], ["e0"]),
                  oh.make_node("Neg", ["x"], ["e1"])]
    if else_slice:  # a shorter second output: the result becomes dynamic
        else_nodes += [const("s", [0], np.int64), const("e", [2], np.int64)]
        else_nodes[2] = oh.make_node("Neg", ["x"], ["n"])
        else_nodes.append(oh.make_node("Slice", ["n", "s", "e"], ["e1"]))
    else_b = oh.make_graph(else_nodes, "else", [], [vi("e0", F, None), vi("e1", F, None)])
    node = oh.make_node("If", ["c"], ["r0", "r1"], then_branch=then_b, else_branch=else_b)
    return model([node], [vi("c", B, []), vi("x", F, [3]), vi("y", F, [3])],
                 [vi("r0", F, None), vi("r1", F, None)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_runtime_condition(cond):
    x, y = np.array([1, -2, 3], np.float32), np.array([0.5, 0.5, 4], np.float32)
    compare(if_model(), {"c": np.array(cond), "x": x, "y": y})
    compare(if_model(else_slice=True), {"c": np.array(cond), "x": x, "y": y})


def test_if_known_condition_lowers_one_branch():
    m = if_model()
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array(False), "c"))
    del m.graph.input[0]
    compare(m, {"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)})


def test_if_branches_of_different_rank_are_refused():
    then_b = oh.make_graph([const("a", [1.0, 2.0])], "t", [], [vi("a", F, None)])
    else_b = oh.make_graph([const("b", [[1.0]])], "e", [], [vi("b", F, None)])
    m = model([oh.make_node("If", ["c"], ["r"], then_branch=then_b, else_branch=else_b)],
              [vi("c", B, [])], [vi("r", F, None)])
    with pytest.raises(ro.ConversionError, match="outputs of one rank"):
        ro.convert(m)


# ---- Loop -------------------------------------------------------------------------------------

def loop_model(m_known=None, with_cond=True, scan=True):
    """Loop(M, cond, acc): acc = acc * 0.5 + x[i % 3]; keep going while sum(acc) < limit;
    scan outputs acc and i."""
    body_nodes = [
        const("three", 3, np.int64), oh.make_node("Mod", ["i", "three"], ["j"]),
        oh.make_node("Gather", ["x", "j"], ["xj"]),
        const("half", 0.5), oh.make_node("Mul", ["acc_in", "half"], ["h"]),
        oh.make_node("Add", ["h", "xj"], ["acc_out"]),
        oh.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
        oh.make_node("Less", ["s", "limit"], ["c_out"] if with_cond else ["unused"]),
        oh.make_node("Identity", ["acc_out"], ["scan_acc"]),
        oh.make_node("Identity", ["i"], ["scan_i"]),
    ]
    if not with_cond:
        body_nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    outs = [vi("c_out", B, []), vi("acc_out", F, [2])]
    if scan:
        outs += [vi("scan_acc", F, [2]), vi("scan_i", I64, [])]
    body = oh.make_graph(body_nodes, "body", [vi("i", I64, []), vi("c_in", B, []),
                                              vi("acc_in", F, [2])], outs)
    inits, inputs = [], [vi("x", F, [3, 2]), vi("acc0", F, [2]), vi("limit", F, [])]
    if m_known is not None:
        inits.append(onnx.numpy_helper.from_array(np.array(m_known, np.int64), "M"))
    else:
        inputs.append(vi("M", I64, []))
    node = oh.make_node("Loop", ["M", "", "acc0"],
                        ["acc"] + (["sa", "si"] if scan else []), body=body)
    outputs = [vi("acc", F, [2])] + ([vi("sa", F, None), vi("si", I64, None)] if scan else [])
    return model([node], inputs, outputs, inits)


@pytest.mark.parametrize("limit", [100.0, 2.5, -1.0])
def test_loop_known_trip_count_with_early_exit(limit):
    x = np.array([[1, 0], [0, 1], [2, 2]], np.float32)
    got = compare(loop_model(m_known=6), {"x": x, "acc0": np.zeros(2, np.float32),
                                          "limit": np.array(limit, np.float32)})
    assert got[1].shape[0] == (6 if limit == 100.0 else 1 if limit == -1.0 else got[1].shape[0])


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_loop_runtime_trip_count(trips):
    x = np.array([[1, 0], [0, 1], [2, 2]], np.float32)
    compare(loop_model(scan=False), {"x": x, "acc0": np.ones(2, np.float32),
                                     "limit": np.array(1e9, np.float32),
                                     "M": np.array(trips, np.int64)})


def test_loop_without_condition_gives_exact_scan_outputs():
    x = np.array([[1, 0], [0, 1], [2, 2]], np.float32)
    got = compare(loop_model(m_known=4, with_cond=False),
                  {"x": x, "acc0": np.zeros(2, np.float32), "limit": np.array(0, np.float32)})
    assert got[1].shape == (4, 2) and got[2].tolist() == [0, 1, 2, 3]


def fibonacci_model():
    """a, b = b, a + b for M steps: the carried values swap (a parallel assignment)."""
    body = oh.make_graph([oh.make_node("Identity", ["b_in"], ["a_out"]),
                          oh.make_node("Add", ["a_in", "b_in"], ["b_out"]),
                          oh.make_node("Identity", ["c_in"], ["c_out"])], "body",
                         [vi("i", I64, []), vi("c_in", B, []), vi("a_in", I64, [1]),
                          vi("b_in", I64, [1])],
                         [vi("c_out", B, []), vi("a_out", I64, [1]), vi("b_out", I64, [1])])
    node = oh.make_node("Loop", ["M", "", "a0", "b0"], ["a", "b"], body=body)
    return model([node], [vi("M", I64, []), vi("a0", I64, [1]), vi("b0", I64, [1])],
                 [vi("a", I64, [1]), vi("b", I64, [1])])


def test_loop_carried_values_swap():
    got = compare(fibonacci_model(), {"M": np.array(10, np.int64), "a0": np.array([0]),
                                      "b0": np.array([1])})
    assert got[0].tolist() == [55]


def test_nested_loop_and_if_in_body():
    """Outer loop over i < 3: inner loop adds i to v j < 2 times when i is odd (an If in the
    inner body), else doubles v."""
    cond_b = oh.make_graph([oh.make_node("Add", ["w_in", "fi"], ["t"])], "odd", [],
                           [vi("t", F, [2])])
    even_b = oh.make_graph([oh.make_node("Add", ["w_in", "w_in"], ["e"])], "even", [],
                           [vi("e", F, [2])])
    inner = oh.make_graph([
        const("two", 2, np.int64), oh.make_node("Mod", ["i", "two"], ["r"]),
        const("one", 1, np.int64), oh.make_node("Equal", ["r", "one"], ["odd"]),
        oh.make_node("Cast", ["i"], ["fi"], to=F),
        oh.make_node("If", ["odd"], ["w_out"], then_branch=cond_b, else_branch=even_b),
        oh.make_node("Identity", ["ci"], ["co"])], "inner",
        [vi("j", I64, []), vi("ci", B, []), vi("w_in", F, [2])],
        [vi("co", B, []), vi("w_out", F, [2])])
    outer = oh.make_graph([
        const("k", 2, np.int64),
        oh.make_node("Loop", ["k", "", "v_in"], ["v_out"], body=inner),
        oh.make_node("Identity", ["c"], ["c_out"])], "outer",
        [vi("i", I64, []), vi("c", B, []), vi("v_in", F, [2])],
        [vi("c_out", B, []), vi("v_out", F, [2])])
    m = model([const("M", 3, np.int64), oh.make_node("Loop", ["M", "", "v0"], ["v"], body=outer)],
              [vi("v0", F, [2])], [vi("v", F, [2])])
    compare(m, {"v0": np.array([1.0, -1.0], np.float32)})


def test_growing_loop_carried_value_is_refused():
    body = oh.make_graph([oh.make_node("Concat", ["v_in", "v_in"], ["v_out"], axis=0),
                          oh.make_node("Identity", ["c"], ["c_out"])], "body",
                         [vi("i", I64, []), vi("c", B, []), vi("v_in", F, [1])],
                         [vi("c_out", B, []), vi("v_out", F, None)])
    m = model([const("M", 3, np.int64), oh.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
              [vi("v0", F, [1])], [vi("v", F, None)])
    with pytest.raises(ro.ConversionError, match="changes shape across iterations"):
        ro.convert(m)


def test_scan_output_of_unknown_length_is_refused():
    m = loop_model()
    with pytest.raises(ro.ConversionError, match="needs a known trip count"):
        ro.convert(m)


def test_endless_loop_stops_at_max_steps():
    body = oh.make_graph([oh.make_node("Identity", ["c"], ["c_out"]),
                          oh.make_node("Identity", ["v_in"], ["v_out"])], "body",
                         [vi("i", I64, []), vi("c", B, []), vi("v_in", F, [1])],
                         [vi("c_out", B, []), vi("v_out", F, [1])])
    m = model([oh.make_node("Loop", ["", "", "v0"], ["v"], body=body)],
              [vi("v0", F, [1])], [vi("v", F, [1])])
    module = ro.load(m, max_steps=1000)
    try:
        with pytest.raises(Error, match="max_steps"):
            module(np.ones(1, np.float32))
    finally:
        module.close()


# ---- Scan -------------------------------------------------------------------------------------

def scan_model(in_axes=None, in_dirs=None, out_axes=None, out_dirs=None):
    """Running sum and product over x along a scan axis; the scan outputs are the sum and the
    slice times 2."""
    body = oh.make_graph([oh.make_node("Add", ["s_in", "xt"], ["s_out"]),
                          oh.make_node("Mul", ["p_in", "xt"], ["p_out"]),
                          const("two", 2.0), oh.make_node("Mul", ["xt", "two"], ["x2"]),
                          oh.make_node("Identity", ["s_out"], ["ys"])], "body",
                         [vi("s_in", F, [4]), vi("p_in", F, [4]), vi("xt", F, [4])],
                         [vi("s_out", F, [4]), vi("p_out", F, [4]), vi("ys", F, [4]),
                          vi("x2", F, [4])])
    attrs = dict(num_scan_inputs=1, body=body)
    for key, value in (("scan_input_axes", in_axes), ("scan_input_directions", in_dirs),
                       ("scan_output_axes", out_axes), ("scan_output_directions", out_dirs)):
        if value is not None:
            attrs[key] = value
    shape = [3, 4] if not in_axes else [4, 3]
    node = oh.make_node("Scan", ["s0", "p0", "x"], ["s", "p", "ys", "x2"], **attrs)
    return model([node], [vi("s0", F, [4]), vi("p0", F, [4]), vi("x", F, shape)],
                 [vi(n, F, None) for n in ("s", "p", "ys", "x2")])


@pytest.mark.parametrize("kw", [dict(), dict(in_dirs=[1]), dict(out_dirs=[1, 0]),
                                dict(in_axes=[1], out_axes=[1, -1], out_dirs=[0, 1])])
def test_scan_matches_onnxruntime(kw):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3) if kw.get("in_axes") else (3, 4)).astype(np.float32)
    compare(scan_model(**kw), {"s0": np.zeros(4, np.float32), "p0": np.ones(4, np.float32),
                               "x": x})


def test_scan_of_dynamic_length_is_refused():
    with pytest.raises(ro.ConversionError, match="dynamic shapes"):
        ro.convert(scan_model(), dynamic_bounds={"x": {0: 8}})


# ---- the ops ----------------------------------------------------------------------------------

def program(build, *inputs):
    b = ProgramBuilder()
    m = b.method("forward")
    xs = [m.input(f"x{k}", str(a.dtype), a.shape) for k, a in enumerate(inputs)]
    for k, y in enumerate(build(m, *xs)):
        m.output(y, f"y{k}")
    return b


def run(b, *inputs):
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
        return [np.array(y) for y in f(*inputs)]


@pytest.mark.parametrize("axis,index", [(0, 1), (1, -1), (2, 0)])
def test_copy_into(axis, index):
    base = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    x = -np.ones(np.delete(base.shape, axis), np.int16)

    def build(m, b0, x0, i0):
        out = m.tensor("int16", base.shape)
        m.copy(b0, out=out)
        m.call("copy_into", x0, i0, axis, out=out)
        return [out]

    (got,) = run(program(build, base, x, np.array(index)), base, x, np.array(index))
    want = base.copy()
    np.moveaxis(want, axis, 0)[index] = x
    np.testing.assert_array_equal(got, want)


def test_copy_into_errors():
    base, x = np.zeros((0, 3), np.float32), np.zeros(3, np.float32)

    def build(m, b0, x0, i0):
        out = m.tensor("float32", b0.shape)
        m.copy(b0, out=out)
        m.call("copy_into", x0, i0, 0, out=out)
        return [out]

    with pytest.raises(Error, match="index 0 is out of range for axis 0"):
        run(program(build, base, x, np.array(0)), base, x, np.array(0))
    bad = np.zeros(2, np.float32)
    with pytest.raises(Error, match="it must be out's shape"):
        run(program(build, np.zeros((2, 3), np.float32), bad, np.array(0)),
            np.zeros((2, 3), np.float32), bad, np.array(0))


@pytest.mark.parametrize("axis,index,count", [(2, 0, 3), (2, 5, 3), (2, -4, 2), (0, 1, 1),
                                               (2, 4, 0)])
def test_copy_into_a_block(axis, index, count):
    """x of out's rank lands at [index, index + its size): a KV cache written at its length."""
    base = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    shape = list(base.shape)
    shape[axis] = count
    x = -np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)

    def build(m, b0, x0, i0):
        out = m.tensor("float32", base.shape)
        m.copy(b0, out=out)
        m.call("copy_into", x0, i0, axis, out=out)
        return [out]

    (got,) = run(program(build, base, x, np.array(index)), base, x, np.array(index))
    want = base.copy()
    start = index % base.shape[axis] if index < 0 else index
    np.moveaxis(want, axis, 0)[start:start + count] = np.moveaxis(x, axis, 0)
    np.testing.assert_array_equal(got, want)


def test_copy_into_a_block_past_the_end_fails_and_keeps_the_method():
    base, x = np.zeros((2, 6), np.float32), np.ones((2, 3), np.float32)

    def build(m, b0, x0, i0):
        out = m.tensor("float32", b0.shape)
        m.copy(b0, out=out)
        m.call("copy_into", x0, i0, 1, out=out)
        return [out]

    with rt.Program.load(program(build, base, x, np.array(0)).to_bytes()) as p, \
            p.load_method("forward") as f:
        with pytest.raises(rt.InvalidArgument, match=r"a block of 3 at index 4 does not fit axis "
                                                      r"1 of out, of size 6"):
            f(base, x, np.array(4))
        got = np.asarray(f(base, x, np.array(3))[0])
    assert got[:, 3:].tolist() == [[1] * 3] * 2 and not got[:, :3].any()


def test_assign_checks_the_shape_at_run():
    def build(m, x0, n0):
        part = m.call("slice", x0, [0], n0, [0], None, outputs=[("float32", (4,), True)])[0]
        out = m.tensor("float32", (2,))
        m.call("assign", part, out=out)
        return [out]

    x = np.arange(4, dtype=np.float32)
    b = program(build, x, np.array([2]))
    (got,) = run(b, x, np.array([2]))
    assert got.tolist() == [0, 1]
    with pytest.raises(Error, match="out"):
        run(b, x, np.array([3]))


def test_loop_over_a_dynamic_value():
    """A loop-carried value with a dynamic size keeps its bounds: v = v * 2 + i, M times."""
    body = oh.make_graph([const("two", 2.0), oh.make_node("Mul", ["v_in", "two"], ["d"]),
                          oh.make_node("Cast", ["i"], ["fi"], to=F),
                          oh.make_node("Add", ["d", "fi"], ["v_out"]),
                          oh.make_node("Identity", ["c"], ["c_out"])], "body",
                         [vi("i", I64, []), vi("c", B, []), vi("v_in", F, ["n"])],
                         [vi("c_out", B, []), vi("v_out", F, ["n"])])
    m = model([const("M", 3, np.int64), oh.make_node("Loop", ["M", "", "x"], ["v"], body=body)],
              [vi("x", F, ["n"])], [vi("v", F, ["n"])])
    module = ro.load(m, dynamic_bounds={"x": [8]})
    try:
        for n in (0, 3, 8):
            x = np.arange(n, dtype=np.float32)
            (got,) = module(x)
            np.testing.assert_allclose(np.array(got), ((x * 2 + 0) * 2 + 1) * 2 + 2)
    finally:
        module.close()
