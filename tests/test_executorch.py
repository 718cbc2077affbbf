"""ExecuTorch .pte programs: conversion, execution and parity with torch's recorded outputs.

The .pte files and their expected outputs are in tests/data/executorch/ (see
scripts/export_executorch.py and the fixtures' README); nothing here imports executorch or
torch. Tests that read the .npz expectations need numpy and skip without it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import runtime_py as rt
from runtime_py import executorch as et

pytestmark = pytest.mark.core  # numpy-free parts run under every interpreter

DATA = Path(__file__).parent / "data" / "executorch"
RTOL, ATOL = 1e-5, 1e-6
FIXTURES = ["add", "mlp", "cnn", "attn"]  # exported by the issue's author (bench_inputs.npz)
EXPORTS = ["mobilenet", "lstm", "two_methods", "counter", "kv_cache", "channels_last",
           "channels_last_weights", "ops", "more", "mlp_dynamic", "cnn_dynamic", "synthetic",
           "synthetic_inline"]


def _np():
    return pytest.importorskip("numpy")


def _close(np, got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype == np.float32 or want.dtype == np.float64:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _calls(npz):
    """{(method, call): (inputs, outputs)} from the NAME.npz key scheme."""
    calls = {}
    for key in npz.files:
        head, _, tail = key.partition("_call")
        call, _, slot = tail.partition("_")
        entry = calls.setdefault((head, int(call)), ({}, {}))
        side = entry[0] if slot.startswith("in") else entry[1]
        side[int(slot[len("in") if slot.startswith("in") else len("out"):])] = npz[key]
    return {k: ([v[0][i] for i in sorted(v[0])], [v[1][j] for j in sorted(v[1])])
            for k, v in calls.items()}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_matches_torch(name):
    np = _np()
    bench = np.load(DATA / "bench_inputs.npz")
    inputs = [bench[f"{name}_in0"]] + ([bench["add_in1"]] if name == "add" else [])
    with et.load(DATA / f"{name}.pte") as module:
        (y,) = module.forward(*inputs)
    _close(np, y, bench[f"{name}_ref"], name)


@pytest.mark.parametrize("name", EXPORTS)
def test_export_matches_torch(name):
    """Every method of every exported program, calls in order (state carries over)."""
    np = _np()
    calls = _calls(np.load(DATA / f"{name}.npz"))
    with et.load(DATA / f"{name}.pte") as module:
        for (method, call) in sorted(calls, key=lambda k: (k[0], k[1])):
            inputs, expected = calls[(method, call)]
            outputs = module.run_method(method, inputs)
            assert len(outputs) == len(expected)
            for j, (got, want) in enumerate(zip(outputs, expected)):
                _close(np, got, want, f"{name}.{method} call {call} output {j}")


def test_mutable_buffer_persists_across_calls_and_restarts_per_method_instance():
    np = _np()
    calls = _calls(np.load(DATA / "counter.npz"))
    program = rt.Program.load(et.convert(DATA / "counter.pte"))
    with program:
        meta = program.method_meta("forward")
        assert {"count", "total"} <= {info.name for info in meta.attributes}
        with program.load_method("forward") as method:
            for call in range(3):
                inputs, expected = calls[("forward", call)]
                (y,) = method(*inputs)
                _close(np, y, expected[0], f"call {call}")
            # torch's buffers after three calls: count 3, total 0.5 + the inputs' sum
            np.testing.assert_allclose(np.asarray(method.get_attribute("count")), [3.0])
            total = 0.5 + sum(calls[("forward", c)][0][0] for c in range(3))
            np.testing.assert_allclose(np.asarray(method.get_attribute("total")), total,
                                       rtol=RTOL, atol=ATOL)
        with program.load_method("forward") as fresh:  # a new instance starts from the file
            inputs, expected = calls[("forward", 0)]
            _close(np, fresh(*inputs)[0], expected[0], "fresh method, first call")


def test_two_methods_are_both_methods():
    np = _np()
    calls = _calls(np.load(DATA / "two_methods.npz"))
    with et.load(DATA / "two_methods.pte") as module:
        assert sorted(module.method_names) == ["decode", "forward"]
        assert module.method_meta("decode").num_inputs == 2
        assert module.method_meta("forward").num_inputs == 1
        for method in ("decode", "forward"):
            inputs, expected = calls[(method, 0)]
            _close(np, module.run_method(method, inputs)[0], expected[0], method)


def test_channels_last_input_is_logical_nchw_with_any_strides():
    """The .pte declares dim order (0, 2, 3, 1): our method takes the logical NCHW array;
    a channels-last strided view of the same values gives the same result."""
    np = _np()
    calls = _calls(np.load(DATA / "channels_last.npz"))
    (x,), (want,) = calls[("forward", 0)]
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    strided = nhwc.transpose(0, 3, 1, 2)  # NCHW shape, NHWC memory
    assert strided.shape == x.shape and not strided.flags.c_contiguous
    with et.load(DATA / "channels_last.pte") as module:
        info = module.method_meta("forward").input_tensor_meta(0)
        assert tuple(info.shape) == (1, 4, 5, 5)
        _close(np, module.forward(x)[0], want, "contiguous input")
        _close(np, module.forward(strided)[0], want, "channels-last strided input")
        with pytest.raises(rt.InvalidArgument):
            module.forward(nhwc)  # NHWC-shaped data is refused, never misread


def test_runtime_load_chooses_importer_by_header(tmp_path):
    pte = DATA / "add.pte"
    one = b"\x00\x00\x80\x3f"  # float32 1.0
    module = rt.load(str(pte))
    assert module.method_names == ("forward",)
    with rt.load(pte.read_bytes()) as from_bytes:
        y = from_bytes.forward(memoryview(one).cast("f"), memoryview(one).cast("f"))[0]
        assert y.tolist() == [2.0]
    renamed = tmp_path / "model.bin"  # the header decides, not the suffix
    renamed.write_bytes(pte.read_bytes())
    with rt.load(renamed) as m:
        assert m.method_meta("forward").num_inputs == 2
    native = tmp_path / "add.rtp"
    native.write_bytes(et.convert(pte))
    with rt.load(native) as m:
        assert m.method_meta("forward").num_inputs == 2
    module.close()


def test_runtime_load_still_imports_onnx():
    pytest.importorskip("onnx")
    np = _np()
    with rt.load(DATA / "mobilenet.onnx") as module:
        (x,), (want,) = _calls(np.load(DATA / "mobilenet.npz"))[("forward", 0)]
        np.testing.assert_allclose(np.asarray(module.forward(x)[0]), want, rtol=1e-4,
                                   atol=1e-5)


def test_convert_cli_writes_a_program(tmp_path):
    out = tmp_path / "cnn.rtp"
    proc = subprocess.run([sys.executable, "-m", "runtime_py", "convert", str(DATA / "cnn.pte"),
                           "-o", str(out)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1])))
    assert proc.returncode == 0, proc.stderr
    with rt.Program.load(str(out)) as program:
        assert program.method_names == ("forward",)
        assert tuple(program.method_meta("forward").input_tensor_meta(0).shape) == (1, 3, 64, 64)


def test_the_importer_imports_no_executorch_torch_or_flatbuffers():
    code = ("import sys, runtime_py.executorch as et; et.convert(sys.argv[1]); "
            "bad = {'torch', 'executorch', 'flatbuffers', 'numpy'} & set(sys.modules); "
            "print(sorted(bad))")
    proc = subprocess.run([sys.executable, "-c", code, str(DATA / "attn.pte")],
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1])))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_supported_ops_cover_the_issue_list():
    required = ["aten::addmm.out", "aten::mm.out", "aten::bmm.out", "aten::convolution.out",
                "aten::_native_batch_norm_legit_no_training.out",
                "aten::max_pool2d_with_indices.out", "aten::avg_pool2d.out", "aten::mean.out",
                "aten::sum.IntList_out", "aten::relu.out", "aten::gelu.out",
                "aten::_softmax.out", "aten::_log_softmax.out", "aten::native_layer_norm.out",
                "aten::permute_copy.out", "aten::view_copy.out", "aten::expand_copy.out",
                "aten::squeeze_copy.dims_out", "aten::unsqueeze_copy.out",
                "aten::select_copy.int_out", "aten::slice_copy.Tensor_out", "aten::cat.out",
                "aten::clone.out", "dim_order_ops::_clone_dim_order.out",
                "dim_order_ops::_to_dim_order_copy.out", "aten::add.out",
                "aten::add.Scalar_out", "aten::sub.out", "aten::mul.out",
                "aten::mul.Scalar_out", "aten::div.out", "aten::where.self_out",
                "aten::eq.Scalar_out", "aten::any.out", "aten::logical_not.out",
                "aten::full.out", "aten::full_like.out", "aten::embedding.out",
                "aten::index.Tensor_out", "aten::arange.start_out"]
    supported = set(et.supported_ops())
    assert not [op for op in required if op not in supported]


def test_converted_program_is_planned_by_our_planner():
    """ExecuTorch's memory plan is dropped: ours reuses memory across the transformer's
    temporaries, so the arena is well below the sum of its tensors."""
    builder = et.build(DATA / "attn.pte")
    planned, unplanned = builder.memory_report()["forward"]
    assert 0 < planned < unplanned


def test_cli_inspects_a_pte_directly():
    proc = subprocess.run([sys.executable, "-m", "runtime_py", "inspect",
                           str(DATA / "two_methods.pte")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1])))
    assert proc.returncode == 0, proc.stderr
    assert "2 method(s)" in proc.stdout
    assert "method 'decode'" in proc.stdout and "input 1 'input_1': tensor float32 [6]" in proc.stdout


def test_constants_stored_in_another_dim_order_are_read_in_logical_order():
    from runtime_py.executorch._convert import _permute_bytes

    # logical [[0, 1, 2], [3, 4, 5]] stored in dim order (1, 0): column by column
    stored = bytes([0, 3, 1, 4, 2, 5])
    assert _permute_bytes(stored, (2, 3), (1, 0), 1) == bytes([0, 1, 2, 3, 4, 5])
    # NCHW [1, 2, 2, 2] stored channels-last (0, 2, 3, 1): element (c, h, w) at (h * 2 + w) * 2 + c
    logical = [c * 4 + h * 2 + w for c in range(2) for h in range(2) for w in range(2)]
    nhwc = [logical[c * 4 + h * 2 + w] for h in range(2) for w in range(2) for c in range(2)]
    assert _permute_bytes(bytes(nhwc), (1, 2, 2, 2), (0, 2, 3, 1), 1) == bytes(logical)


def test_dynamic_batch_is_bounded_by_the_export():
    with et.load(DATA / "cnn_dynamic.pte") as module:
        info = module.method_meta("forward").input_tensor_meta(0)
        assert info.dynamic and tuple(info.shape) == (8, 3, 8, 8)
        with pytest.raises(rt.InvalidArgument):
            module.forward(memoryview(bytearray(9 * 3 * 8 * 8 * 4)).cast("f", (9, 3, 8, 8)))


def test_pte_with_recorded_torch_outputs_bundled_and_weights_apart(tmp_path):
    """The MLP fixture converted with torch's recorded output as a bundled case and its weights
    in a data file: `verify` passes through the CLI, and a wrong expectation fails it."""
    np = _np()
    refs = np.load(DATA / "bench_inputs.npz")
    x, want = refs["mlp_in0"], refs["mlp_ref"]
    weights, program = tmp_path / "mlp.rtd", tmp_path / "mlp.rtp"
    program.write_bytes(et.convert(DATA / "mlp.pte", bundled_cases=[("forward", [x], [want])],
                                   external_data=str(weights)))
    assert weights.stat().st_size > 256 * 512 * 4  # the first layer's weights live there
    verify = [sys.executable, "-m", "runtime_py", "verify", str(program), "--data", str(weights),
              "--rtol", "1e-5", "--atol", "1e-6"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    proc = subprocess.run(verify, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 0 failed" in proc.stdout
    wrong = tmp_path / "wrong.rtp"
    wrong.write_bytes(et.convert(DATA / "mlp.pte", bundled_cases=[("forward", [x], [want + 1])],
                                 external_data=str(weights)))
    proc = subprocess.run(verify[:4] + [str(wrong)] + verify[5:], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 1 and "FAIL" in proc.stdout
