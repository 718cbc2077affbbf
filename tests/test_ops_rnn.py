"""The recurrent layers (ONNX LSTM, GRU, RNN -> the lstm, gru and rnn ops of rnn.c): random
configurations against onnxruntime (directions, initial states, sequence_lens, peepholes,
clip, input_forget, linear_before_reset, activations with alpha/beta), layout 1 against
layout 0, empty sizes, thread counts, and the errors of bad programs and bad lengths."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402
from runtime_py.errors import Error  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def make_case(op: str, seq: int, batch: int, inp: int, hidden: int, *, direction="forward",
              layout=0, bias=True, lens=None, h0=False, c0=False, peep=False, attrs=None,
              seed=0) -> Tuple[Any, Dict[str, np.ndarray]]:
    """A one-node model (weights as initializers) and its feeds; every output requested."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    scale = 1 / np.sqrt(inp + hidden + 1)
    x = rng.standard_normal((seq, batch, inp) if layout == 0 else (batch, seq, inp))
    consts = {"W": rng.standard_normal((dirs, g * hidden, inp)) * scale,
              "R": rng.standard_normal((dirs, g * hidden, hidden)) * scale,
              "B": rng.standard_normal((dirs, 2 * g * hidden)) * scale,
              "P": rng.standard_normal((dirs, 3 * hidden)) * scale}
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    feeds = {"X": x.astype(np.float32)}
    names = ["X", "W", "R", "B" if bias else ""]
    if lens is not None:
        feeds["L"] = np.asarray(lens, np.int32)
    names.append("L" if lens is not None else "")
    if h0:
        feeds["H0"] = rng.standard_normal(state).astype(np.float32)
    names.append("H0" if h0 else "")
    if op == "LSTM":
        if c0:
            feeds["C0"] = rng.standard_normal(state).astype(np.float32)
        names += ["C0" if c0 else "", "P" if peep else ""]
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node_attrs = dict(hidden_size=hidden, direction=direction, **(attrs or {}))
    if layout:
        node_attrs["layout"] = layout
    node = helper.make_node(op, names, outs, **node_attrs)
    inputs = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "L" else
                                            TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    inits = [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.astype(np.float32).ravel())
             for k, v in consts.items() if k in names]
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), feeds


def run_ours(model, feeds, **options) -> List[np.ndarray]:
    module = ro.load(model, **options)
    try:
        return [np.array(y) for y in module(*feeds.values())]
    finally:
        module.close()


def run_ort(model, feeds) -> List[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


CASES = [
    ("LSTM", dict()),
    ("LSTM", dict(direction="bidirectional", lens=[4, 0, 2], h0=True, c0=True, peep=True)),
    ("LSTM", dict(direction="reverse", attrs=dict(clip=0.6, input_forget=1), peep=True)),
    ("LSTM", dict(bias=False, attrs=dict(
        activations=["HardSigmoid", "Tanh", "Softsign"], activation_alpha=[0.3],
        activation_beta=[0.4]))),
    ("LSTM", dict(direction="bidirectional", attrs=dict(
        activations=["Sigmoid", "LeakyRelu", "Tanh", "Sigmoid", "Tanh", "ScaledTanh"],
        activation_alpha=[0.1, 0.8], activation_beta=[1.3]))),
    ("GRU", dict(h0=True)),
    ("GRU", dict(direction="bidirectional", lens=[1, 4, 3], attrs=dict(linear_before_reset=1))),
    ("GRU", dict(direction="reverse", lens=[2, 2, 4], attrs=dict(clip=0.5))),
    ("GRU", dict(attrs=dict(activations=["Sigmoid", "Relu"], linear_before_reset=1))),
    ("RNN", dict(h0=True)),
    ("RNN", dict(direction="bidirectional", lens=[3, 0, 4], h0=True,
                 attrs=dict(activations=["Relu", "Softsign"]))),
    ("RNN", dict(attrs=dict(activations=["Affine"], activation_alpha=[0.5],
                            activation_beta=[0.1]))),
    ("RNN", dict(direction="reverse", attrs=dict(activations=["Elu"], activation_alpha=[0.7],
                                                 clip=1.5))),
]


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CASES)])
def test_matches_onnxruntime(op, kw):
    model, feeds = make_case(op, 4, 3, 5, 6, seed=len(str(kw)), **kw)
    assert_close(run_ours(model, feeds), run_ort(model, feeds))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_larger_sizes_use_the_gemm_paths(op):
    """Batch 1 (the direct recurrent product) and batch 9 (the GEMM), hidden past a tile."""
    for batch in (1, 9):
        model, feeds = make_case(op, 7, batch, 33, 40, direction="bidirectional", h0=True,
                                 seed=batch)
        assert_close(run_ours(model, feeds), run_ort(model, feeds))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layout_1_is_layout_0_transposed(op):
    """onnxruntime has no layout 1: compare with our layout 0 on transposed data."""
    kw = dict(direction="bidirectional", lens=[3, 1], h0=True, c0=op == "LSTM")
    m1, f1 = make_case(op, 3, 2, 4, 5, layout=1, seed=3, **kw)
    m0, f0 = make_case(op, 3, 2, 4, 5, layout=0, seed=3, **kw)
    f0 = dict(f0, X=f1["X"].transpose(1, 0, 2).copy())
    for k in ("H0", "C0"):
        if k in f0:
            f0[k] = f1[k].transpose(1, 0, 2).copy()
    got1, got0 = run_ours(m1, f1), run_ours(m0, f0)
    np.testing.assert_allclose(got1[0], got0[0].transpose(2, 0, 1, 3), rtol=1e-6, atol=1e-7)
    for a, b in zip(got1[1:], got0[1:]):
        np.testing.assert_allclose(a, b.transpose(1, 0, 2), rtol=1e-6, atol=1e-7)


def test_dynamic_batch_and_float16():
    model, feeds = make_case("LSTM", 4, 3, 5, 6, direction="bidirectional", h0=True, seed=4)
    for vi in model.graph.input:  # a symbolic batch, for onnxruntime's sake
        vi.type.tensor_type.shape.dim[1].dim_param = "batch"
    want = run_ort(model, feeds)
    module = ro.load(model, dynamic_bounds={"X": {1: 8}, "H0": {1: 8}})
    try:
        got = [np.array(y) for y in module(*feeds.values())]
        assert_close(got, want)
        small = {"X": feeds["X"][:, :1].copy(), "H0": feeds["H0"][:, :1].copy()}
        got = [np.array(y) for y in module(*small.values())]
        assert_close(got, run_ort(model, small))
    finally:
        module.close()
    half, _ = make_case("LSTM", 4, 3, 5, 6, direction="bidirectional", h0=True, seed=4)
    for t in list(half.graph.initializer):
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float16),
                                                t.name))
    for vi in list(half.graph.input) + list(half.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    got = run_ours(half, {k: v.astype(np.float16) for k, v in feeds.items()})
    assert all(g.dtype == np.float16 for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=1e-2, atol=1e-2)


def test_results_do_not_depend_on_threads():
    for batch in (1, 12):
        model, feeds = make_case("GRU", 6, batch, 20, 50, direction="bidirectional", seed=5)
        one = run_ours(model, feeds, num_threads=1)
        four = run_ours(model, feeds, num_threads=4)
        for a, b in zip(one, four):
            np.testing.assert_array_equal(a, b)


# ---- the ops through the builder -------------------------------------------------------------

def lstm_program(seq, batch, inp, hidden, *, acts=(0, 1, 1), params=None, w_rows=None,
                 lens=False):
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (seq, batch, inp))
    w = m.constant(np.ones((1, w_rows or 4 * hidden, inp), np.float32) * 0.1)
    r = m.constant(np.ones((1, 4 * hidden, hidden), np.float32) * 0.1)
    seq_lens = m.input("lens", "int32", (batch,)) if lens else None
    state = (1, batch, hidden)
    y, yh, yc = m.call("lstm", x, w, r, None, seq_lens, None, None, None, 0, 0,
                       m.int_list(list(acts)),
                       m.double_list(params if params is not None else [0.0] * 2 * len(acts)),
                       0.0, False,
                       outputs=[("float32", (seq, 1, batch, hidden), False),
                                ("float32", state, False), ("float32", state, False)])
    m.output(y, "y")
    m.output(yh, "y_h")
    m.output(yc, "y_c")
    return b


@pytest.mark.parametrize("seq,batch,inp,hidden", [(0, 2, 3, 4), (3, 0, 3, 4), (3, 2, 0, 4),
                                                  (3, 2, 3, 0)])
def test_zero_sizes(seq, batch, inp, hidden):
    with rt.Program.load(lstm_program(seq, batch, inp, hidden).to_bytes()) as program, \
            program.load_method("forward") as f:
        x = np.ones((seq, batch, inp), np.float32)
        y, yh, yc = (np.array(v) for v in f(x))
    assert y.shape == (seq, 1, batch, hidden) and yh.shape == (1, batch, hidden)
    if seq == 0:  # no step: the states stay at their zero start
        assert not yh.any() and not yc.any()
    if inp == 0 and seq and batch and hidden:  # no input: only the recurrence (from zero)
        assert not y.any()


def load_error(b) -> str:
    with pytest.raises(Error) as e:
        program = rt.Program.load(b.to_bytes())
        try:
            program.load_method("forward").close()
        finally:
            program.close()
    return str(e.value)


def test_errors_name_the_argument():
    assert "activations has 2 items" in load_error(lstm_program(2, 1, 3, 4, acts=(0, 1)))
    assert "not a known activation" in load_error(lstm_program(2, 1, 3, 4, acts=(0, 1, 99)))
    assert "activation_params has 2 items" in load_error(
        lstm_program(2, 1, 3, 4, params=[0.0, 0.0]))
    assert "w has shape" in load_error(lstm_program(2, 1, 3, 4, w_rows=15))


def test_sequence_lens_out_of_range_fails_the_run():
    with rt.Program.load(lstm_program(3, 2, 3, 4, lens=True).to_bytes()) as program, \
            program.load_method("forward") as f:
        x = np.ones((3, 2, 3), np.float32)
        f(x, np.array([3, 1], np.int32))
        with pytest.raises(Error, match=r"sequence_lens\[1\] is 4"):
            f(x, np.array([3, 4], np.int32))


def test_unsupported_attributes_are_refused_cleanly():
    model, _ = make_case("RNN", 2, 1, 3, 4, attrs=dict(activations=["Gelu"]))
    with pytest.raises(ro.ConversionError, match="activation 'Gelu' is not supported"):
        ro.convert(model)
    model, _ = make_case("RNN", 2, 1, 3, 4, attrs=dict(activations=["Tanh"],
                                                     activation_alpha=[1.0]))
    with pytest.raises(ro.ConversionError, match="more values than the activations"):
        ro.convert(model)
