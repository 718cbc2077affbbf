"""Real exports with dynamic axes: one converted program per model runs every shape.

tests/data/dynamic holds tiny transformers models (random, seeded weights, built from configs by
scripts/export_dynamic_onnx.py) exported by torch.onnx.export with dynamic batch and sequence
axes, by the classic and the dynamo exporter, with onnxruntime's outputs at three shapes. Each
model is converted once, with the bounds its manifest entry gives, and run at every shape; no
torch is needed here.
"""
import json
import os

import numpy as np
import pytest

pytest.importorskip("onnx")

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as rto  # noqa: E402
from runtime_py.errors import InvalidArgument  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "dynamic")
ATOL = 1e-4


def _entries():
    path = os.path.join(DATA, "manifest.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        entries = json.load(f)
    return [e for e in entries if "error" not in e]


ENTRIES = _entries()


def _bounds(entry):
    return {name: {int(axis): int(bound) for axis, bound in axes.items()}
            for name, axes in entry["bounds"].items()}


@pytest.fixture(scope="module", params=ENTRIES, ids=lambda e: e["file"])
def converted(request):
    entry = request.param
    module = rto.load(os.path.join(DATA, entry["file"]), dynamic_bounds=_bounds(entry))
    yield entry, module
    module.close()


def _case(entry, k):
    with np.load(os.path.join(DATA, entry["file"].replace(".onnx", ".npz"))) as npz:
        inputs = {name: npz[f"case{k}_in_{name}"] for name in entry["inputs"]}
        outputs = [npz[f"case{k}_out_{i}"] for i in range(sum(
            1 for key in npz.files if key.startswith(f"case{k}_out_")))]
    return inputs, outputs


def test_manifest_lists_every_family_and_exporter():
    """The set the issue asks for; an entry whose export failed says why in the manifest."""
    path = os.path.join(DATA, "manifest.json")
    with open(path) as f:
        entries = json.load(f)
    assert {(e["family"], e["exporter"]) for e in entries} >= {
        (family, exporter) for family in ("gpt2", "llama", "bert", "vit", "t5_encoder",
                                          "wav2vec2", "whisper_encoder")
        for exporter in ("classic", "dynamo")}


def test_every_shape_matches_onnxruntime(converted):
    entry, module = converted
    names = [info.name for info in module.method_meta().inputs]
    shapes = set()
    for k in range(entry["cases"]):
        inputs, want = _case(entry, k)
        got = module.forward(*[inputs[n] for n in names])
        got = got if isinstance(got, (list, tuple)) else [got]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape, (k, i, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=0, atol=ATOL, err_msg=f"case {k} output {i}")
        shapes.add(tuple(inputs[names[0]].shape))
    assert len(shapes) == entry["cases"]  # the cases differ in shape


def test_a_size_beyond_its_bound_is_refused_by_name(converted):
    entry, module = converted
    inputs, _ = _case(entry, 0)
    name, axes = next(iter(_bounds(entry).items()))
    axis, bound = next(iter(axes.items()))
    x = inputs[name]
    shape = list(x.shape)
    shape[axis] = bound + 1
    big = np.resize(x, shape)
    feeds = dict(inputs, **{name: big})
    names = [info.name for info in module.method_meta().inputs]
    with pytest.raises(InvalidArgument, match=name):
        module.forward(*[feeds[n] for n in names])
    module.forward(*[inputs[n] for n in names])  # still usable


def test_method_meta_shows_each_dynamic_axis_and_its_bound(converted):
    entry, module = converted
    meta = module.method_meta()
    for info in meta.inputs:
        axes = _bounds(entry).get(info.name, {})
        assert info.dynamic == bool(axes)
        assert info.dynamic_axes == tuple(sorted(axes))
        for axis, bound in axes.items():
            assert info.shape[axis] == bound
            assert f"<={bound}" in repr(info)


def test_a_fixed_axis_of_a_dynamic_input_must_have_its_size(converted):
    """Only the axes given bounds vary; another size on a fixed axis is refused by set_input
    (it would otherwise meet shape arithmetic that assumed the model's size)."""
    entry, module = converted
    inputs, _ = _case(entry, 0)
    names = [info.name for info in module.method_meta().inputs]
    for info in module.method_meta().inputs:
        fixed = [a for a in range(info.ndim) if a not in info.dynamic_axes]
        if info.dynamic and fixed and info.shape[fixed[0]] > 1:
            axis = fixed[0]
            shape = list(inputs[info.name].shape)
            shape[axis] -= 1
            feeds = dict(inputs, **{info.name: np.resize(inputs[info.name], shape)})
            with pytest.raises(InvalidArgument, match=f"axis {axis} of size "
                                                      f"{info.shape[axis]} exactly"):
                module.forward(*[feeds[n] for n in names])
            return
    pytest.skip("every axis of every dynamic input varies")


def test_load_passes_importer_options_and_refuses_them_elsewhere(tmp_path):
    entry = next(e for e in ENTRIES if e["file"] == "gpt2_classic.onnx")
    path = os.path.join(DATA, entry["file"])
    inputs, want = _case(entry, 1)
    with rt.load(path, dynamic_bounds=_bounds(entry)) as module:
        assert module.method_meta().inputs[0].dynamic_axes == (0, 1)
        got = module.forward(*[inputs[n] for n in entry["inputs"]])
        np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=0, atol=ATOL)
    shapes = {n: a.shape for n, a in inputs.items()}
    with rt.load(path, input_shapes=shapes) as module:
        assert not module.method_meta().inputs[0].dynamic
    with pytest.raises(InvalidArgument, match="dynamic_bounds names 'input_idz', not an input"):
        rt.load(path, dynamic_bounds={"input_idz": {0: 4}})
    with pytest.raises(InvalidArgument, match="axis 5 with bound 4 does not fit its rank 2"):
        rt.load(path, dynamic_bounds={"input_ids": {5: 4}})
    program = tmp_path / "p.rtp"
    program.write_bytes(rto.convert(path, input_shapes=shapes))
    with pytest.raises(InvalidArgument, match="apply to ONNX models only"):
        rt.load(str(program), dynamic_bounds=_bounds(entry))


def test_cli_dynamic_flag(tmp_path, capsys):
    from runtime_py.__main__ import main

    path = os.path.join(DATA, "bert_classic.onnx")
    out = str(tmp_path / "bert.rtp")
    flags = [f"--dynamic={name}=0:4" for name in ("input_ids", "attention_mask",
                                                    "token_type_ids")]
    flags += ["--dynamic", "input_ids=1:32", "--dynamic", "attention_mask:1=32",  # older form
              "--dynamic", "token_type_ids=1:32"]
    assert main(["convert", path, "-o", out, *flags]) == 0
    meta = rt.Program.load(out).method_meta("forward")
    assert [i.dynamic_axes for i in meta.inputs] == [(0, 1)] * 3
    assert [i.shape for i in meta.inputs] == [(4, 32)] * 3
    with pytest.raises(SystemExit):
        main(["convert", path, "-o", out, "--dynamic", "input_ids=one:32"])
    assert "argument --dynamic: 'input_ids=one:32' is not NAME=AXIS:MAX" in capsys.readouterr().err
    assert main(["convert", path, "-o", out, "--dynamic", "input_idz=0:4"]) == 1
    assert "dynamic_bounds names 'input_idz'" in capsys.readouterr().err


def test_tile_by_counts_computed_from_sizes():
    """Tile(x, Concat(Shape(y), [2])): the repeat counts are sizes known only at run; the
    output's bound is the product of the bounds, and every size within them runs."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["y"], ["ys"]),
             helper.make_node("Concat", ["ys", "two"], ["repeats"], axis=0),
             helper.make_node("Tile", ["x", "repeats"], ["z"])]
    graph = helper.make_graph(
        nodes, "tile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
                        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [helper.make_tensor("two", TensorProto.INT64, [1], [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with rto.load(model, dynamic_bounds={"x": {0: 4}, "y": {0: 5}}) as module:
        assert module.method_meta().outputs[0].shape == (20, 6)
        for n, m in ((1, 1), (4, 5), (2, 3), (3, 0)):
            x = np.random.default_rng(n).random((n, 3), dtype=np.float32)
            (z,) = module.forward(x, np.zeros(m, np.float32))
            np.testing.assert_array_equal(np.asarray(z), np.tile(x, (m, 2)))
    graph.input.append(helper.make_tensor_value_info("r", TensorProto.INT64, [2]))
    graph.node[2].input[1] = "r"
    with pytest.raises(rto.ConversionError, match="run-time shape needs upper bounds.*value_bounds"):
        rto.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                    dynamic_bounds={"x": {0: 4}, "y": {0: 5}})
