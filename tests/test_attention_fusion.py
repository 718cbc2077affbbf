"""The importer's attention fusion: the chains exporters write (Q K^T, scale as Mul or Div, an
additive mask, Softmax, the IsNaN guard, V) become one attention op reading q, k, v through the
transposes around it, checked against onnxruntime on the ONNX graph itself; chains whose shapes
the op cannot take fall back to the nodes they replaced; ONNX Attention lowers to the same op;
and every exported transformer of tests/data/dynamic has its attention fused."""
from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402

DYNAMIC = Path(__file__).parent / "data" / "dynamic"


def _model(nodes, inputs, output_shape, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, dt, s) for n, dt, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _check(model, feeds, fused=True):
    """Our program's output against onnxruntime's; returns the program's op counts."""
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    data = ro.convert(model)
    with rt.Program.load(data) as p, p.load_method("forward") as f:
        names = [i.name for i in f.method_meta.inputs]
        got = np.asarray(f(*[feeds[n] for n in names])[0])
        ops = collections.Counter(op for op in p.instruction_ops("forward") if op)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (ops["attention"] > 0) == fused, ops
    if fused:
        assert ops["softmax"] == 0 and ops["matmul"] == 0, ops
    return ops


def _chain(style, mask=None, guard=False, axis=-1):
    """y = attention of x_q [B, S, H, D] (heads apart after a projection), k and v alike, in
    the exporter `style`: 'classic' (Mul by sqrt(scale) on Q and on K^T, K^T by perm
    0,2,3,1), 'div' (MatMul then Div by sqrt(D), K^T by perm 0,1,3,2 of [B, H, S, D])."""
    nodes = [helper.make_node("Transpose", ["xq"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["xv"], ["v"], perm=[0, 2, 1, 3])]
    inits = []
    if style == "classic":
        nodes += [helper.make_node("Transpose", ["xk"], ["kt"], perm=[0, 2, 3, 1]),
                  helper.make_node("Mul", ["q", "c"], ["qs"]),
                  helper.make_node("Mul", ["kt", "c"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["s"])]
        inits.append(("c", np.float32(8 ** -0.25)))
    else:
        nodes += [helper.make_node("Transpose", ["xk"], ["k"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["q", "kt"], ["s0"]),
                  helper.make_node("Div", ["s0", "d"], ["s"])]
        inits.append(("d", np.float32(np.sqrt(8))))
    scores = "s"
    if mask is not None:
        nodes.append(helper.make_node("Add", ["s", "mask"], ["sm"]))
        scores = "sm"
    nodes.append(helper.make_node("Softmax", [scores], ["p"], axis=axis))
    probs = "p"
    if guard:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]),
                  helper.make_node("Where", ["nan", "zero", "p"], ["pg"])]
        inits.append(("zero", np.float32(0)))
        probs = "pg"
    nodes += [helper.make_node("MatMul", [probs, "v"], ["o"]),
              helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    return nodes, inits


def _feeds(b=2, s=5, h=4, d=8, mask_shape=None, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {n: rng.standard_normal((b, s, h, d)).astype(np.float32) for n in ("xq", "xk", "xv")}
    if mask_shape:
        m = rng.standard_normal(mask_shape).astype(np.float32)
        m[..., -1] = -np.inf  # never seen
        feeds["mask"] = m
    return feeds


@pytest.mark.parametrize("style", ["classic", "div"])
@pytest.mark.parametrize("mask_shape", [None, (2, 1, 5, 5), (5, 5)])
@pytest.mark.parametrize("guard", [False, True])
def test_exported_chains_fuse_into_one_op_without_transposes(style, mask_shape, guard):
    nodes, inits = _chain(style, mask_shape, guard)
    feeds = _feeds(mask_shape=mask_shape)
    inputs = [(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    ops = _check(_model(nodes, inputs, (2, 5, 4, 8), inits), feeds)
    assert ops["transpose"] == 0, ops


def test_a_chain_whose_shapes_do_not_fit_runs_as_the_nodes_it_replaced():
    """K with batch 1 against Q's batch 2: MatMul broadcasts it, the attention op does not."""
    nodes, inits = _chain("div")
    feeds = _feeds()
    feeds["xk"] = feeds["xk"][:1]
    inputs = [(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    _check(_model(nodes, inputs, (2, 5, 4, 8), inits), feeds, fused=False)


def test_a_mask_that_would_grow_the_scores_is_not_fused():
    nodes, inits = _chain("div", mask=True)
    feeds = _feeds(b=1, mask_shape=(3, 4, 5, 5))  # batch 3 against the scores' 1
    inputs = [(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    _check(_model(nodes, inputs, (3, 5, 4, 8), inits), feeds, fused=False)


@pytest.mark.parametrize("axis,fused", [(3, True), (2, False)])
def test_a_softmax_axis_written_out_fuses_only_when_last(axis, fused):
    """Paddle writes axis=3 for the last of four: fused; another axis runs as written."""
    nodes, inits = _chain("div", axis=axis)
    feeds = _feeds()
    inputs = [(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    _check(_model(nodes, inputs, (2, 5, 4, 8), inits), feeds, fused=fused)


def test_a_softmax_read_elsewhere_is_not_fused():
    nodes, inits = _chain("div")
    nodes.append(helper.make_node("ReduceMax", ["p"], ["pmax"], keepdims=0))
    feeds = _feeds()
    inputs = [(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    model = _model(nodes, inputs, (2, 5, 4, 8), inits)
    model.graph.output.append(helper.make_tensor_value_info("pmax", TensorProto.FLOAT, None))
    data = ro.convert(model)
    with rt.Program.load(data) as p:
        assert "attention" not in p.instruction_ops("forward")


def _attention_node_model(three_d, causal, gqa, past):
    b, sq, hq, d = 2, 3, 4, 8
    hkv = 2 if gqa else hq
    attrs = dict(is_causal=int(causal))
    if three_d:
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
        shapes = [(b, sq, hq * d), (b, sq, hkv * d), (b, sq, hkv * d)]
    else:
        shapes = [(b, hq, sq, d), (b, hkv, sq, d), (b, hkv, sq, d)]
    names = ["Q", "K", "V", "", "past_key" if past else "", "past_value" if past else ""]
    node = helper.make_node("Attention", [n for n in names if n] if past else names[:3],
                            ["y"] + (["pk", "pv"] if past else []), **attrs)
    if past:
        node.input[:] = ["Q", "K", "V", "", "past_key", "past_value"]
    inputs = [(n, TensorProto.FLOAT, s) for n, s in zip("QKV", shapes)]
    if past:
        inputs += [(n, TensorProto.FLOAT, (b, hkv, 4, d)) for n in ("past_key", "past_value")]
    out = (b, sq, hq * d) if three_d else (b, hq, sq, d)
    model = _model([node], inputs, out, opset=23)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, _, s in inputs}
    return model, feeds


@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("gqa", [False, True])
@pytest.mark.parametrize("past", [False, True])
def test_onnx_attention_against_the_onnx_reference(three_d, causal, gqa, past):
    from onnx.reference import ReferenceEvaluator
    model, feeds = _attention_node_model(three_d, causal, gqa, past)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    with rt.Program.load(ro.convert(model)) as p, p.load_method("forward") as f:
        names = [i.name for i in f.method_meta.inputs]
        got = np.asarray(f(*[feeds[n] for n in names])[0])
        assert p.instruction_ops("forward").count("attention") == 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _manifest():
    with open(DYNAMIC / "manifest.json") as f:
        return [e for e in json.load(f) if "error" not in e]


@pytest.mark.parametrize("entry", _manifest(), ids=lambda e: e["file"])
def test_every_exported_transformer_has_its_attention_fused(entry):
    from tests.test_onnx_dynamic import _bounds
    data = ro.convert(str(DYNAMIC / entry["file"]), dynamic_bounds=_bounds(entry))
    with rt.Program.load(data) as p:
        ops = collections.Counter(op for op in p.instruction_ops("forward") if op)
    assert ops["attention"] >= 2 and ops["softmax"] == 0, ops
    if entry["family"].startswith("llama"):  # q and k of two layers: Llama's rotate-half RoPE
        assert ops["rotary"] == 4 and ops["neg"] == 0, ops


def _rotary_model(three_d, interleaved, rotated, positions):
    b, h, s, d = 2, 3, 5, 16
    shape = (b, s, h * d) if three_d else (b, h, s, d)
    attrs = dict(interleaved=int(interleaved), rotary_embedding_dim=rotated)
    if three_d:
        attrs["num_heads"] = h
    r = rotated or d
    cache_shape = (12, r // 2) if positions else (b, s, r // 2)
    inputs = [("X", TensorProto.FLOAT, shape), ("cos", TensorProto.FLOAT, cache_shape),
              ("sin", TensorProto.FLOAT, cache_shape)]
    names = ["X", "cos", "sin"]
    if positions:
        inputs.append(("pos", TensorProto.INT64, (b, s)))
        names.append("pos")
    node = helper.make_node("RotaryEmbedding", names, ["y"], **attrs)
    model = _model([node], inputs, shape, opset=23)
    rng = np.random.default_rng(2)
    feeds = {"X": rng.standard_normal(shape).astype(np.float32)}
    angles = rng.uniform(0, 6, cache_shape)
    feeds["cos"], feeds["sin"] = np.cos(angles).astype(np.float32), np.sin(angles).astype(
        np.float32)
    if positions:
        feeds["pos"] = rng.integers(0, 12, (b, s)).astype(np.int64)
    return model, feeds


@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotated", [0, 8])
@pytest.mark.parametrize("positions", [False, True])
def test_onnx_rotary_embedding_against_the_onnx_reference(three_d, interleaved, rotated,
                                                          positions):
    from onnx.reference import ReferenceEvaluator
    model, feeds = _rotary_model(three_d, interleaved, rotated, positions)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    with rt.Program.load(ro.convert(model)) as p, p.load_method("forward") as f:
        names = [i.name for i in f.method_meta.inputs]
        got = np.asarray(f(*[feeds[n] for n in names])[0])
        assert p.instruction_ops("forward").count("rotary") == 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _rotate_half_model(split):
    """x * cos + cat(-x[..., split:], x[..., :split]) * sin, as Llama's export writes it."""
    nodes = [helper.make_node("Slice", ["x", "h", "end", "axis"], ["x2"]),
             helper.make_node("Slice", ["x", "zero", "h", "axis"], ["x1"]),
             helper.make_node("Neg", ["x2"], ["n"]),
             helper.make_node("Concat", ["n", "x1"], ["rot"], axis=-1),
             helper.make_node("Mul", ["x", "cos"], ["a"]),
             helper.make_node("Mul", ["rot", "sin"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    inits = [("h", np.array([split])), ("end", np.array([2 ** 62])), ("axis", np.array([-1])),
             ("zero", np.array([0]))]
    shape = (2, 3, 5, 8)
    inputs = [("x", TensorProto.FLOAT, shape), ("cos", TensorProto.FLOAT, (2, 1, 5, 8)),
              ("sin", TensorProto.FLOAT, (2, 1, 5, 8))]
    rng = np.random.default_rng(6)
    angles = rng.uniform(0, 6, (2, 1, 5, 4))
    feeds = {"x": rng.standard_normal(shape).astype(np.float32),
             "cos": np.cos(np.concatenate([angles] * 2, -1)).astype(np.float32),
             "sin": np.sin(np.concatenate([angles] * 2, -1)).astype(np.float32)}
    return _model(nodes, inputs, shape, inits), feeds


@pytest.mark.parametrize("split,fused", [(4, True), (3, False)])
def test_rotate_half_becomes_one_rotary_op_only_at_half(split, fused):
    """Split at half the head: one rotary op; elsewhere the nodes it would replace."""
    model, feeds = _rotate_half_model(split)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with rt.Program.load(ro.convert(model)) as p, p.load_method("forward") as f:
        got = np.asarray(f(feeds["x"], feeds["cos"], feeds["sin"])[0])
        assert ("rotary" in p.instruction_ops("forward")) == fused
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
