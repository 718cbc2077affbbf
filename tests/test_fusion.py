"""Import-time fusions (Conv+BatchNormalization folding, MatMul+Add into linear, activations in
the conv/linear epilogue, MaxPool into the Conv before it): each fused program must compute
what the unfused one does."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402
from tests import onnx_models  # noqa: E402

CASES = {
    # model, input shape, ops the fused program must use, ops it must no longer use
    "mlp": (onnx_models.mlp, (4, 256), {"linear_act"}, {"relu"}),
    "cnn": (onnx_models.small_cnn, (2, 3, 64, 64), {"conv2d_act_max_pool2d", "conv2d_act", "linear"},
            {"mul", "relu", "max_pool2d"}),
    "transformer": (onnx_models.transformer_block, (2, 32, 128), {"linear", "linear_act"},
                    {"erf"}),
    "mobilenet": (lambda batch: onnx_models.mobilenet(batch, size=64), (1, 3, 64, 64),
                  {"conv2d_act"}, {"mul"}),
}


def run(data: bytes, x: np.ndarray):
    with rt.Program.load(data) as program, program.load_method("forward") as forward:
        return np.asarray(forward(x)[0]), set(op for op in program.instruction_ops("forward") if op)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_program_matches_unfused(name):
    make, shape, must_use, must_drop = CASES[name]
    model = make(batch=shape[0])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    try:
        plain, plain_ops = run(ro.convert(model, fuse=False), x)
    except ro.ConversionError as e:
        pytest.skip(f"an op of the unfused model is not supported yet: {e}")
    fused, fused_ops = run(ro.convert(model), x)
    assert must_use <= fused_ops, fused_ops
    assert not (must_drop & fused_ops), fused_ops
    assert len(fused_ops) <= len(plain_ops) + 2
    np.testing.assert_allclose(fused, plain, rtol=1e-4, atol=1e-4)


def test_fusion_keeps_intermediates_other_nodes_read():
    """A Conv whose output also feeds a second node must not absorb the Relu after it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["r", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert "conv2d_act" not in ops
    plain, _ = run(ro.convert(model, fuse=False), x)
    np.testing.assert_array_equal(fused, plain)


def _erf_gelu_model(style: str):
    """MatMul + Add, then GELU spelled out with Erf in one of the exporters' forms."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 5)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")]
    for name, value in (("half", 0.5), ("one", 1.0), ("sqrt2", np.sqrt(2)),
                        ("inv_sqrt2", 1 / np.sqrt(2))):
        inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
    chains = {  # (op, inputs, output) after f = x @ w + b
        "half_first": [("Div", ["f", "sqrt2"], "d"), ("Erf", ["d"], "e"),
                       ("Add", ["e", "one"], "a"), ("Mul", ["half", "f"], "h"),
                       ("Mul", ["h", "a"], "y")],
        "half_last": [("Mul", ["inv_sqrt2", "f"], "d"), ("Erf", ["d"], "e"),
                      ("Add", ["one", "e"], "a"), ("Mul", ["f", "a"], "h"),
                      ("Mul", ["h", "half"], "y")],
        "shared": [("Div", ["f", "sqrt2"], "d"), ("Erf", ["d"], "e"), ("Add", ["e", "one"], "a"),
                   ("Mul", ["f", "half"], "h"), ("Mul", ["h", "a"], "y")],
    }
    # half_first: (0.5 * f) * (1 + erf(f / sqrt 2)); half_last, as torch exports it:
    # (f * (1 + erf(f * (1 / sqrt 2)))) * 0.5; shared: the Erf output is also a graph output.
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["f"])]
    nodes += [helper.make_node(op, inputs, [out]) for op, inputs, out in chains[style]]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])]
    if style == "shared":
        outputs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 5]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("style", ["half_first", "half_last", "shared"])
def test_erf_gelu_chain_becomes_one_epilogue(style):
    """The five-node erf GELU folds into linear_act unless another reader sees a piece of it;
    either way the result is the exact GELU of x @ w + b."""
    from math import erf

    model = _erf_gelu_model(style)
    x = np.random.default_rng(4).standard_normal((3, 6)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    if style == "shared":
        assert "erf" in ops and "linear_act" not in ops
    else:
        assert "linear_act" in ops and "erf" not in ops and "mul" not in ops
    w, b = _weights(model)
    f = x.astype(np.float64) @ w + b
    want = 0.5 * f * (1 + np.vectorize(erf)(f / np.sqrt(2)))
    np.testing.assert_allclose(fused, want, rtol=1e-5, atol=1e-5)


def _weights(model):
    from onnx import numpy_helper

    found = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    return found["w"], found["b"]


def _linear_then(chain, extra_inits=(), duplicate_add=False, outputs=("y",), shapes=None):
    """f = x @ w + b (computed twice when duplicate_add, as the classic exporter repeats
    values), then `chain` of (op, inputs, output); extra_inits are (name, value) pairs, shapes
    the outputs' shapes where not [3, 5]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 5)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")]
    inits += [numpy_helper.from_array(np.asarray(v, np.asarray(v).dtype if isinstance(v, np.ndarray)
                                                 else np.float32), n) for n, v in extra_inits]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["f"])]
    if duplicate_add:
        nodes.append(helper.make_node("Add", ["m", "b"], ["f2"]))
    nodes += [helper.make_node(op, inputs, [out]) for op, inputs, out in chain]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, (shapes or {}).get(o, [3, 5]))
         for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _tanh_gelu(f):
    return 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))


@pytest.mark.parametrize("duplicate_add", [False, True])
def test_tanh_gelu_chain_becomes_one_epilogue(duplicate_add):
    """GPT-2's GELU, 0.5 f (1 + tanh(sqrt(2/pi) (f + 0.044715 f^3))), as eight nodes: one
    linear_act. With f computed twice (the cube from the second copy, as the classic exporter
    writes it), the copies merge first."""
    constants = (("half", 0.5), ("one", 1.0), ("three", 3.0), ("c", 0.044715),
                 ("k", np.sqrt(2 / np.pi)))
    cube_of = "f2" if duplicate_add else "f"
    chain = [("Pow", [cube_of, "three"], "p"), ("Mul", ["p", "c"], "pc"), ("Add", ["f", "pc"], "s"),
             ("Mul", ["s", "k"], "u"), ("Tanh", ["u"], "t"), ("Add", ["t", "one"], "a"),
             ("Mul", ["f", "half"], "h"), ("Mul", ["h", "a"], "y")]
    model = _linear_then(chain, constants, duplicate_add)
    x = np.random.default_rng(6).standard_normal((3, 6)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert ops == {"linear_act"}, ops
    w, b = _weights(model)
    np.testing.assert_allclose(fused, _tanh_gelu(x.astype(np.float64) @ w + b), rtol=1e-5,
                               atol=1e-6)
    plain, plain_ops = run(ro.convert(model, fuse=False), x)
    assert {"tanh", "pow"} <= plain_ops
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)


def test_silu_becomes_one_epilogue_unless_its_sigmoid_is_read():
    x = np.random.default_rng(7).standard_normal((3, 6)).astype(np.float32)
    model = _linear_then([("Sigmoid", ["f"], "s"), ("Mul", ["f", "s"], "y")])
    fused, ops = run(ro.convert(model), x)
    assert ops == {"linear_act"}, ops
    w, b = _weights(model)
    f = x.astype(np.float64) @ w + b
    np.testing.assert_allclose(fused, f / (1 + np.exp(-f)), rtol=1e-5, atol=1e-6)
    shared = _linear_then([("Sigmoid", ["f"], "s"), ("Mul", ["s", "f"], "y")],
                          outputs=("y", "s"))
    with rt.Program.load(ro.convert(shared)) as program:
        assert "sigmoid" in program.instruction_ops("forward")


def test_repeated_nodes_merge_but_keep_outputs_and_random_ops():
    """merge_duplicates drops a node that repeats an earlier one (its readers read the first),
    but keeps one whose output is a graph output, and never merges random draws."""
    from onnx import helper

    from runtime_py.onnx._patterns import merge_duplicates

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Relu", ["x"], ["out"]),
             helper.make_node("RandomUniformLike", ["x"], ["r1"]),
             helper.make_node("RandomUniformLike", ["x"], ["r2"])]
    merged = merge_duplicates(nodes, keep={"out"})
    assert [list(n.output) for n in merged] == [["a"], ["c"], ["out"], ["r1"], ["r2"]]
    assert list(merged[1].input) == ["a", "a"]
    assert list(nodes[2].input) == ["a", "b"]  # the caller's node is not modified


@pytest.mark.parametrize("kind,op,params", [(3, "sigmoid", ()), (4, "gelu", (False,)),
                                            (6, "silu", ()), (7, "gelu", (True,))])
def test_epilogue_activations_give_the_separate_ops_bits(kind, op, params):
    """linear_act and conv2d_act apply sigmoid, silu and both GELUs with the unary ops' own
    vector math: the same bits as the op after an unfused layer."""
    from runtime_py.compiler import ProgramBuilder

    rng = np.random.default_rng(kind)
    x = (rng.standard_normal((7, 40)) * 3).astype(np.float32)
    w = rng.standard_normal((33, 40)).astype(np.float32)
    img = (rng.standard_normal((1, 3, 9, 9)) * 3).astype(np.float32)
    k = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv, iv = m.input("x", "float32", x.shape), m.input("img", "float32", img.shape)
    wv, kv = m.constant(w), m.constant(k)
    fused = m.call("linear_act", xv, wv, None, kind, 0.0, 0.0,
                   outputs=[("float32", (7, 33), False)])[0]
    plain = m.linear(xv, wv)
    separate = m.call(op, plain, *params, outputs=[("float32", (7, 33), False)])[0]
    conv_fused = m.call("conv2d_act", iv, kv, None, [1, 1], [1, 1, 1, 1], [1, 1], 1, kind, 0.0,
                        0.0, outputs=[("float32", (1, 5, 9, 9), False)])[0]
    conv = m.conv2d(iv, kv, padding=1)
    conv_separate = m.call(op, conv, *params, outputs=[("float32", (1, 5, 9, 9), False)])[0]
    for i, v in enumerate((fused, separate, conv_fused, conv_separate)):
        m.output(v, f"y{i}")
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
        outs = [np.asarray(o) for o in method(x, img)]
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[2], outs[3])


@pytest.mark.parametrize("shared", [False, True])
def test_activation_fuses_through_a_reshape_of_the_layer_output(shared):
    """Gemm, Reshape, activation (the classic exporter's 3-D linear): the activation moves into
    the linear's epilogue, unless the unreshaped result has another reader."""
    chain = [("Reshape", ["f", "shape"], "r"), ("Relu", ["r"], "y")]
    outputs = ("y",)
    if shared:
        chain.append(("Neg", ["f"], "n"))
        outputs = ("y", "n")
    model = _linear_then(chain, [("shape", np.array([15], np.int64))], outputs=outputs,
                         shapes={"y": [15]})
    x = np.random.default_rng(8).standard_normal((3, 6)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert ("linear_act" in ops) != shared and ("relu" in ops) == shared, ops
    w, b = _weights(model)
    np.testing.assert_allclose(fused, np.maximum(x @ w + b, 0).reshape(15), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("style", ["classic", "dynamo"])
def test_rms_norm_chain_and_its_weight_become_one_op(style):
    """Llama's RMSNorm as the exporters write it (classic: ReduceMean with an axes attribute and
    Div(1, Sqrt); dynamo, opset 18: axes as an input and Reciprocal), then the weight: one
    rms_norm with the weight as its scale."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(9)
    weight = rng.standard_normal(16).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "weight"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    if style == "classic":
        mean = helper.make_node("ReduceMean", ["sq"], ["mean"], axes=[-1], keepdims=1)
        inverse = helper.make_node("Div", ["one", "root"], ["inv"])
        opset = 17
    else:
        mean = helper.make_node("ReduceMean", ["sq", "axes"], ["mean"], keepdims=1)
        inverse = helper.make_node("Reciprocal", ["root"], ["inv"])
        opset = 18
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]), mean,
             helper.make_node("Add", ["mean", "eps"], ["var"]),
             helper.make_node("Sqrt", ["var"], ["root"]), inverse,
             helper.make_node("Mul", ["x", "inv"], ["normed"]),
             helper.make_node("Mul", ["weight", "normed"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert ops == {"rms_norm"}, ops
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * weight
    np.testing.assert_allclose(fused, want, rtol=1e-5, atol=1e-6)
    plain, _ = run(ro.convert(model, fuse=False), x)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)


def test_activation_after_a_1d_conv_runs_in_its_epilogue():
    """A 1-D Conv lowers to conv2d between reshapes; the Gelu after it (wav2vec2's feature
    extractor) still fuses into conv2d_act."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(10)
    w = rng.standard_normal((4, 2, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2]),
             helper.make_node("Gelu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 41])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 19])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    x = rng.standard_normal((1, 2, 41)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert "conv2d_act" in ops and "gelu" not in ops, ops
    plain, _ = run(ro.convert(model, fuse=False), x)
    np.testing.assert_array_equal(fused, plain)


@pytest.mark.parametrize("case", ["epilogue", "x_read_elsewhere", "sigmoid_read_elsewhere"])
def test_builder_fuse_silu(case):
    """ProgramBuilder.fuse_silu (the .pte importer's pass): mul(x, sigmoid(x)) becomes silu,
    in the linear's epilogue when nothing else reads x; a sigmoid another op reads stays."""
    from runtime_py.compiler import ProgramBuilder

    rng = np.random.default_rng(11)
    x = (rng.standard_normal((5, 12)) * 3).astype(np.float32)
    w = rng.standard_normal((7, 12)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    f = m.linear(xv, m.constant(w))
    s = m.call("sigmoid", f, outputs=[("float32", (5, 7), False)])[0]
    m.output(m.mul(f, s), "y")
    if case == "x_read_elsewhere":
        m.output(m.relu(f), "extra")
    if case == "sigmoid_read_elsewhere":
        m.output(s, "extra")
    merged = m.fuse_silu()
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
        ops = set(op for op in program.instruction_ops("forward") if op)
        got = np.asarray(method(x)[0])
    want = {"epilogue": {"linear_act"}, "x_read_elsewhere": {"linear", "silu", "relu"},
            "sigmoid_read_elsewhere": {"linear", "sigmoid", "mul"}}[case]
    assert ops == want and merged == (case != "sigmoid_read_elsewhere"), ops
    f64 = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(got, f64 / (1 + np.exp(-f64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shared", [False, True])
def test_builder_fuse_rms_norm(shared):
    """ProgramBuilder.fuse_rms_norm (the .pte importer's pass): ExecuTorch's decomposed RMSNorm
    and the weight after it become one rms_norm, unless a piece is read elsewhere."""
    from runtime_py.compiler import ProgramBuilder

    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    weight = rng.standard_normal(8).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    mean = m.call("reduce_mean", m.mul(xv, xv), [-1], True,
                  outputs=[("float32", (2, 3, 1), False)])[0]
    root = m.call("sqrt", m.add(mean, m.constant(np.array(1e-5, np.float32))),
                  outputs=[("float32", (2, 3, 1), False)])[0]
    inverse = m.call("reciprocal", root, outputs=[("float32", (2, 3, 1), False)])[0]
    m.output(m.mul(m.constant(weight), m.mul(xv, inverse)), "y")
    if shared:
        m.output(mean, "mean")
    assert m.fuse_rms_norm() == (0 if shared else 1)
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
        ops = set(op for op in program.instruction_ops("forward") if op)
        got = np.asarray(method(x)[0])
    assert (ops == {"rms_norm"}) != shared, ops
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * weight
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _conv_then(chain, inits, opset=13):
    """Conv (4 output channels, bias) on x [1, 3, 6, 6], then `chain` of (op, inputs, output,
    attributes); the last output is y."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(13)
    tensors = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    tensors += [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in inits]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])]
    nodes += [helper.make_node(op, ins, [out], **attrs) for op, ins, out, attrs in chain]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info(chain[-1][2], TensorProto.FLOAT, [1, 4, 6, 6])], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def test_paddle_affine_and_hard_swish_fold_into_the_convolution():
    """PP-OCR's block: conv, Mul by a scalar, Add a scalar (a learnable affine), then hardswish
    written x * clip(x + 3, 0, 6) / 6: one conv2d_act."""
    chain = [("Mul", ["scale", "c"], "m", {}), ("Add", ["m", "shift"], "a", {}),
             ("Add", ["a", "three"], "p", {}), ("Clip", ["p", "zero", "six"], "r", {}),
             ("Mul", ["a", "r"], "h", {}), ("Div", ["h", "six"], "y", {})]
    model = _conv_then(chain, [("scale", [1.7]), ("shift", [-0.3]), ("three", 3.0),
                               ("zero", 0.0), ("six", 6.0)])
    x = (np.random.default_rng(14).standard_normal((1, 3, 6, 6)) * 2).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert ops == {"conv2d_act"}, ops
    plain, plain_ops = run(ro.convert(model, fuse=False), x)
    assert {"clip", "div"} <= plain_ops
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,folds", [((4, 1, 1), True), ((1, 4, 1, 1), True), ((1,), True),
                                         ((1, 1, 6), False)])
def test_per_channel_scale_and_shift_fold_into_the_convolution(shape, folds):
    rng = np.random.default_rng(15)
    chain = [("Mul", ["c", "scale"], "m", {}), ("Add", ["shift", "m"], "y", {})]
    model = _conv_then(chain, [("scale", rng.standard_normal(shape)),
                               ("shift", rng.standard_normal(shape))])
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    fused, ops = run(ro.convert(model), x)
    assert (ops == {"conv2d"}) == folds, ops
    plain, _ = run(ro.convert(model, fuse=False), x)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
