"""Sizes given by graph inputs' contents (convert(value_bounds=...)): one converted program runs
with every value in the stated range and matches onnxruntime; a value beyond what the program
was planned for fails that execute cleanly, naming the op; a missing bound fails the conversion
naming the node and the option."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import runtime_py as rt  # noqa: E402
from runtime_py.onnx import ConversionError, convert  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(op, inputs, output_rank, attrs=None, opset=18, out_type=F32):
    """A one-node model; inputs: (name, elem type, shape), '' for an absent optional input."""
    names = [name for name, _, _ in inputs]
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n],
        [helper.make_tensor_value_info("y", out_type, [None] * output_rank)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(m, value_bounds, feeds_list):
    """Convert once; every feed matches onnxruntime."""
    method = rt.Program.load(convert(m, value_bounds=value_bounds)).load_method("forward")
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in m.graph.input]
    for feeds in feeds_list:
        (want,) = session.run(None, feeds)
        (got,) = method(*[feeds[n] for n in names])
        got = np.asarray(got)
        assert got.shape == want.shape, feeds
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return method


def test_reshape_to_a_shape_input_with_minus_one_and_zero():
    m = model("Reshape", [("x", F32, [2, 3, 4]), ("shape", I64, [3])], 3)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    shapes = [[4, 3, 2], [2, -1, 2], [0, 4, 3], [-1, 1, 8], [24, 1, 1]]
    method = check(m, {"shape": (-1, 24)}, [{"x": x, "shape": np.array(s, np.int64)}
                                            for s in shapes])
    with pytest.raises(rt.InvalidArgument, match="reshape"):
        method(x, np.array([5, 5, 1], np.int64))  # 25 elements, not 24


def test_reshape_allowzero_keeps_literal_zeros():
    m = model("Reshape", [("x", F32, [0, 3, 4]), ("shape", I64, [3])], 3, {"allowzero": 1})
    x = np.zeros((0, 3, 4), np.float32)
    check(m, {"shape": (0, 12)}, [{"x": x, "shape": np.array(s, np.int64)}
                                  for s in ([3, 4, 0], [0, 12, 1])])


def test_expand_tile_and_constant_of_shape_within_bounds():
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    expand = model("Expand", [("x", F32, [3, 1]), ("shape", I64, [2])], 2)
    check(expand, {"shape": (1, 6)}, [{"x": x, "shape": np.array(s, np.int64)}
                                      for s in ([3, 4], [1, 6], [3, 1])])
    tile = model("Tile", [("x", F32, [3, 1]), ("repeats", I64, [2])], 2)
    check(tile, {"repeats": (0, 3)}, [{"x": x, "repeats": np.array(r, np.int64)}
                                      for r in ([1, 1], [2, 3], [0, 2])])
    value = helper.make_tensor("value", F32, [1], [2.5])
    cos = model("ConstantOfShape", [("shape", I64, [3])], 3, {"value": value})
    method = check(cos, {"shape": (0, 5)}, [{"shape": np.array(s, np.int64)}
                                            for s in ([1, 2, 3], [5, 5, 5], [0, 4, 1])])
    with pytest.raises(rt.InvalidArgument, match="constant_of_shape"):
        method(np.array([6, 1, 1], np.int64))


def test_range_of_float_and_int_inputs():
    for t, dtype, bounds, cases in (
            (F32, np.float32, {"start": (-2, 2), "limit": (0, 10), "delta": (0.5, 3)},
             [(0, 10, 0.5), (-2, 3, 1.5), (2, 0, 1)]),
            (TensorProto.INT32, np.int32, {"start": (0, 10), "limit": (0, 10), "delta": (-3, -1)},
             [(10, 0, -3), (5, 1, -1), (0, 5, -2)])):
        m = model("Range", [("start", t, []), ("limit", t, []), ("delta", t, [])], 1,
                  out_type=t)
        check(m, bounds, [{"start": np.array(a, dtype), "limit": np.array(b, dtype),
                           "delta": np.array(c, dtype)} for a, b, c in cases])


def test_one_hot_with_a_float_depth_input():
    m = model("OneHot", [("indices", I64, [4]), ("depth", F32, [1]), ("values", F32, [2])], 2,
              {"axis": 0})
    feeds = [{"indices": np.array([0, 2, -1, 5], np.int64), "depth": np.array([d], np.float32),
              "values": np.array([0, 3], np.float32)} for d in (3.0, 6.0, 1.0)]
    method = check(m, {"depth": (1, 6)}, feeds)
    with pytest.raises(rt.InvalidArgument, match="one_hot"):
        method(feeds[0]["indices"], np.array([7], np.float32), feeds[0]["values"])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_with_pads_and_axes_inputs(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    whole = model("Pad", [("x", F32, [3, 4]), ("pads", I64, [4])], 2, {"mode": mode})
    check(whole, {"pads": (-1, 2)}, [{"x": x, "pads": np.array(p, np.int64)}
                                     for p in ([0, 1, 2, 0], [1, 1, 1, 1], [-1, 0, 1, -1])])
    axes = model("Pad", [("x", F32, [3, 4]), ("pads", I64, [2]), ("", 0, None),
                         ("axes", I64, [1])], 2, {"mode": mode})
    check(axes, {"pads": (0, 2)}, [{"x": x, "pads": np.array(p, np.int64),
                                    "axes": np.array([a], np.int64)}
                                   for p, a in (([1, 2], 0), ([2, 0], -1), ([0, 1], 1))])


@pytest.mark.parametrize("mode,coord", [("nearest", "asymmetric"), ("linear", "half_pixel"),
                                        ("cubic", "align_corners")])
def test_resize_with_scales_and_sizes_inputs(mode, coord):
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5)).astype(np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    scales = model("Resize", [("x", F32, [1, 2, 4, 5]), ("", 0, None),
                              ("scales", F32, [4])], 4, attrs)
    check(scales, {"scales": (0.5, 3)}, [{"x": x, "scales": np.array(s, np.float32)}
                                         for s in ([1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1, 1])])
    sizes = model("Resize", [("x", F32, [1, 2, 4, 5]), ("", 0, None), ("", 0, None),
                             ("sizes", I64, [2])], 4, dict(attrs, axes=[2, 3]))
    method = check(sizes, {"sizes": (1, 9)}, [{"x": x, "sizes": np.array(s, np.int64)}
                                              for s in ([8, 9], [2, 3], [4, 5])])
    with pytest.raises(rt.InvalidArgument, match="resize"):
        method(x, np.array([10, 3], np.int64))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialiased_with_scales_and_sizes_inputs(mode):
    """The filter widens with the scale read at run; the scratch for it is planned from the
    output's bounds."""
    x = np.random.default_rng(2).standard_normal((1, 2, 8, 10)).astype(np.float32)
    attrs = {"mode": mode, "antialias": 1}
    scales = model("Resize", [("x", F32, [1, 2, 8, 10]), ("", 0, None),
                              ("scales", F32, [4])], 4, attrs)
    check(scales, {"scales": (0.1, 2)}, [{"x": x, "scales": np.array(s, np.float32)}
                                         for s in ([1, 1, 0.25, 0.3], [1, 1, 0.5, 2],
                                                   [1, 1, 1, 1], [1, 1, 0.125, 0.1])])
    sizes = model("Resize", [("x", F32, [1, 2, 8, 10]), ("", 0, None), ("", 0, None),
                             ("sizes", I64, [2])], 4, dict(attrs, axes=[2, 3]))
    check(sizes, {"sizes": (1, 16)}, [{"x": x, "sizes": np.array(s, np.int64)}
                                      for s in ([2, 3], [1, 16], [8, 10], [5, 4])])


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keeping_the_aspect_ratio_with_a_sizes_input(policy):
    """One scale for every axis, computed by the program from the sizes read at run."""
    x = np.random.default_rng(3).standard_normal((1, 1, 6, 4)).astype(np.float32)
    m = model("Resize", [("x", F32, [1, 1, 6, 4]), ("", 0, None), ("", 0, None),
                         ("sizes", I64, [2])], 4,
              {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": policy})
    check(m, {"sizes": (1, 12)}, [{"x": x, "sizes": np.array(s, np.int64)}
                                  for s in ([3, 3], [12, 2], [7, 12], [6, 4], [1, 1])])


def test_resize_crop_with_roi_input():
    x = np.random.default_rng(1).standard_normal((1, 1, 6, 6)).astype(np.float32)
    m = model("Resize", [("x", F32, [1, 1, 6, 6]), ("roi", F32, [4]), ("", 0, None),
                         ("sizes", I64, [2])], 4,
              {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
               "axes": [2, 3], "extrapolation_value": 7.0})
    check(m, {"sizes": (1, 8)}, [{"x": x, "roi": np.array(r, np.float32),
                                  "sizes": np.array(s, np.int64)}
                                 for r, s in (([0.2, 0.1, 0.8, 0.9], [3, 4]),
                                              ([-0.5, 0, 1.5, 1], [8, 2]))])


def test_upsample_with_a_scales_input():
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    m = model("Upsample", [("x", F32, [1, 1, 2, 3]), ("scales", F32, [4])], 4,
              {"mode": "nearest"}, opset=9)
    check(m, {"scales": (1, 3)}, [{"x": x, "scales": np.array(s, np.float32)}
                                  for s in ([1, 1, 2, 3], [1, 1, 1, 1], [1, 1, 3, 2])])


def test_squeeze_and_unsqueeze_with_axes_inputs_need_no_bounds():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    squeeze = model("Squeeze", [("x", F32, [1, 2, 1, 3]), ("axes", I64, [2])], 2)
    method = check(squeeze, None, [{"x": x, "axes": np.array(a, np.int64)}
                                   for a in ([0, 2], [-2, 0], [2, 0])])
    with pytest.raises(rt.InvalidArgument, match="squeeze.*size is 2"):
        method(x, np.array([0, 1], np.int64))
    with pytest.raises(rt.InvalidArgument, match="twice"):
        method(x, np.array([0, -4], np.int64))
    y = x.reshape(2, 3)
    unsqueeze = model("Unsqueeze", [("x", F32, [2, 3]), ("axes", I64, [2])], 4)
    method = check(unsqueeze, None, [{"x": y, "axes": np.array(a, np.int64)}
                                     for a in ([0, 3], [1, -1], [-4, 2])])
    with pytest.raises(rt.InvalidArgument, match="out of range"):
        method(y, np.array([0, 4], np.int64))
    method(y, np.array([0, 1], np.int64))  # still usable after the failed execute


def test_refusals_name_the_node_and_the_option():
    m = model("Reshape", [("x", F32, [2, 3]), ("shape", I64, [2])], 2)
    with pytest.raises(ConversionError, match=r"node 'y' \(Reshape\).*value_bounds"):
        convert(m)
    resize = model("Resize", [("x", F32, [1, 1, 2, 2]), ("", 0, None), ("scales", F32, [4])],
                   4)
    with pytest.raises(ConversionError, match=r"\(Resize\).*scales.*value_bounds"):
        convert(resize)
    with pytest.raises(rt.InvalidArgument, match="value_bounds names 'nope'"):
        convert(m, value_bounds={"nope": (0, 1)})
    with pytest.raises(rt.InvalidArgument, match="lowest <= highest"):
        convert(m, value_bounds={"shape": (5, 1)})
    with pytest.raises(rt.InvalidArgument, match="pair"):
        convert(m, value_bounds={"shape": 4})


def test_load_passes_value_bounds_to_the_importer(tmp_path):
    m = model("Reshape", [("x", F32, [2, 3]), ("shape", I64, [2])], 2)
    path = tmp_path / "reshape.onnx"
    onnx.save(m, str(path))
    module = rt.load(str(path), value_bounds={"shape": (-1, 6)})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = module.forward(x, np.array([3, -1], np.int64))
    assert np.asarray(y).tolist() == x.reshape(3, 2).tolist()
