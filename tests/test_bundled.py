"""Bundled test cases: stored in the program (BUNDLE section, format 1.1), read back through
the C ABI, verified against expected outputs computed independently (numpy, onnxruntime, the
onnx reference evaluator), and rejected cleanly when the section is hostile."""
from __future__ import annotations

import array
import math
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import writer as w
from runtime_py.compiler import ProgramBuilder

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(7)
W = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def linear_builder(dynamic: bool = False) -> ProgramBuilder:
    """forward(x: float32 (2, 4), or up to (5, 4)) = relu(x @ W.T + B)."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 4), max_shape=(5, 4) if dynamic else None)
    m.output(m.relu(m.linear(x, m.constant(W), m.constant(B))), "y")
    return b


def reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x.astype(np.float64) @ W.T.astype(np.float64) + B, 0).astype(np.float32)


def sections(data: bytes):
    count, table = struct.unpack_from("<I", data, 24)[0], struct.unpack_from("<Q", data, 32)[0]
    out = {}
    for i in range(count):
        kind, flags, offset, size = struct.unpack_from("<IIQQ", data, table + 24 * i)
        out[kind] = (flags, offset, size)
    return out


# ---- round trip and verification -----------------------------------------------------------

def test_cases_round_trip_and_verify():
    b = linear_builder()
    xs = [RNG.standard_normal((2, 4)).astype(np.float32) for _ in range(3)]
    for x in xs:
        assert b.add_bundled_case("forward", [x], [reference(x)]) in (0, 1, 2)
    data = b.to_bytes()
    assert struct.unpack_from("<HH", data, 8) == (1, 1)  # a 1.1 feature is used
    flags, _, _ = sections(data)[9]
    assert flags == 1  # BUNDLE is OPTIONAL: a reader without it still runs the program
    with rt.Program.load(data) as program:
        cases = program.bundled_tests("forward")
        assert [c.index for c in cases] == [0, 1, 2]
        for case, x in zip(cases, xs):
            assert case.method == "forward"
            np.testing.assert_array_equal(np.asarray(case.inputs[0]), x)
            np.testing.assert_array_equal(np.asarray(case.expected_outputs[0]), reference(x))
        with program.load_method("forward") as forward:
            for i, x in enumerate(xs):
                result = forward.verify_bundled(i)
                assert result.index == i and result.method == "forward"
                np.testing.assert_allclose(np.asarray(result.outputs[0]), reference(x),
                                           rtol=1e-5, atol=1e-6)
                assert result.max_abs_error[0] < 1e-5


def test_failing_case_names_output_and_worst_element():
    b = linear_builder()
    x = np.ones((2, 4), np.float32)
    want = reference(x)
    wrong = want.copy()
    wrong[1, 2] += 0.5       # the worst element
    wrong[0, 0] += 1e-3      # a smaller miss
    b.add_bundled_case("forward", [x], [wrong])
    with rt.Program.load(b.to_bytes()) as program, program.load_method() as forward:
        with pytest.raises(rt.VerificationError) as info:
            forward.verify_bundled(0)
    err = info.value
    assert isinstance(err, rt.Error) and isinstance(err, AssertionError)
    message = str(err)
    assert "method 'forward', bundled case 0: output 0 ('y')" in message
    assert "at 2 of 6 elements" in message and "worst at index [1, 2]" in message
    assert (err.output, err.name, err.index) == (0, "y", (1, 2))
    assert err.got == pytest.approx(float(want[1, 2]), abs=1e-5)
    assert err.expected == pytest.approx(float(wrong[1, 2]))
    assert err.tolerance == pytest.approx(1e-8 + 1e-5 * abs(float(wrong[1, 2])))
    assert (err.mismatched, err.total) == (2, 6)
    assert f"got {err.got!r}, expected {err.expected!r}" in message


def test_tolerances_are_applied():
    b = linear_builder()
    x = np.full((2, 4), 0.5, np.float32)
    near = reference(x) * np.float32(1.001) + np.float32(0.01)  # everything positive: relu'd
    b.add_bundled_case("forward", [x], [near])
    with rt.Program.load(b.to_bytes()) as program, program.load_method() as forward:
        with pytest.raises(rt.VerificationError, match="tolerance"):
            forward.verify_bundled(0)
        with pytest.raises(rt.VerificationError):
            forward.verify_bundled(0, rtol=1e-2)  # the atol part still misses
        result = forward.verify_bundled(0, rtol=2e-3, atol=2e-2)
        assert 0 < result.max_abs_error[0] <= 2e-2 + 2e-3 * np.abs(near).max()


def test_nan_inf_and_integers():
    """NaN matches NaN, infinities only themselves, integers and bools exactly."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (3,))
    k = m.input("k", "int32", (2,))
    m.output(m.div(x, x), "ratio")          # 0/0 = NaN
    m.output(m.add(k, k), "twice")
    m.output(m.equal(k, k), "same")
    x0 = np.array([0.0, 2.0, np.inf], np.float32)
    k0 = np.array([3, -4], np.int32)
    b.add_bundled_case("forward", [x0, k0], [np.array([np.nan, 1.0, np.nan], np.float32),
                                             k0 * 2, np.ones(2, bool)])
    b.add_bundled_case("forward", [x0, k0], [np.array([np.nan, 1.0, np.nan], np.float32),
                                             k0 * 2 + np.array([0, 1], np.int32),
                                             np.ones(2, bool)])
    b.add_bundled_case("forward", [x0, k0], [np.array([1.0, 1.0, np.nan], np.float32),
                                             k0 * 2, np.ones(2, bool)])
    with rt.Program.load(b.to_bytes()) as program, program.load_method() as forward:
        forward.verify_bundled(0, rtol=0.5, atol=100.0)
        with pytest.raises(rt.VerificationError, match=r"output 1 \('twice'\).*index \[1\].*"
                                                       r"got -8, expected -7.*must be equal"):
            forward.verify_bundled(1, rtol=0.5, atol=100.0)
        with pytest.raises(rt.VerificationError, match=r"output 0 .*index \[0\]: got nan, "
                                                       r"expected 1\.0"):
            forward.verify_bundled(2, rtol=0.5, atol=100.0)


def test_dynamic_and_scalar_cases_and_two_methods():
    b = linear_builder(dynamic=True)
    s = b.method("scale")
    v = s.input("v", "float64", (2,))
    factor = s.input_scalar("factor", "double")
    count = s.input_scalar("count", "int")
    s.output(s.mul(v, v), "square")
    s.output(count, "count")
    s.output(factor, "factor")
    x3 = RNG.standard_normal((3, 4)).astype(np.float32)   # fewer rows than the bound
    b.add_bundled_case("forward", [x3], [reference(x3)])
    b.add_bundled_case("scale", [np.array([1.5, -2.0]), 0.25, 7],
                       [np.array([2.25, 4.0]), 7, 0.25])
    with rt.Program.load(b.to_bytes()) as program:
        (case,) = program.bundled_tests("scale")
        assert case.inputs[1:] == (0.25, 7) and case.expected_outputs[1:] == (7, 0.25)
        assert program.bundled_tests("forward")[0].inputs[0].shape == (3, 4)
        from runtime_py.bundled import verify_all

        results = verify_all(program)
        assert [(m, i) for m, i, _ in results] == [("forward", 0), ("scale", 0)]
        assert all(isinstance(r, rt.BundledResult) for _, _, r in results)
        with pytest.raises(rt.NotFound, match="no method 'nope'"):
            program.bundled_tests("nope")
        with program.load_method("scale") as scale, \
                pytest.raises(rt.InvalidArgument, match="bundled case 1 is out of range"):
            scale.verify_bundled(1)


def test_cases_without_numpy_values():
    """Buffers of exactly the declared bytes, Python scalars: no numpy involved."""
    b = ProgramBuilder()
    m = b.method("forward")
    a = m.input("a", "int16", (2, 2))
    m.output(m.add(a, a), "y")
    b.add_bundled_case("forward", [array.array("h", [1, -2, 300, 4])],
                       [array.array("h", [2, -4, 600, 8])])
    with rt.Program.load(b.to_bytes()) as program:
        (case,) = program.bundled_tests()
        assert case.inputs[0].tolist() == [[1, -2], [300, 4]]
        with program.load_method() as forward:
            assert forward.verify_bundled(0).outputs[0].tolist() == [[2, -4], [600, 8]]


@pytest.mark.parametrize("inputs,outputs,match", [
    ([np.zeros((2, 4), np.float64)], [np.zeros((2, 3), np.float32)], "dtype float64.*float32"),
    ([np.zeros((3, 4), np.float32)], [np.zeros((2, 3), np.float32)], r"shape \[3, 4\]"),
    ([], [np.zeros((2, 3), np.float32)], "needs 1 inputs, got 0"),
    ([np.zeros((2, 4), np.float32)], [np.zeros((2, 3), np.float32)] * 2, "1 expected outputs"),
    ([b"\0" * 31], [np.zeros((2, 3), np.float32)], "31 bytes"),
    (["text"], [np.zeros((2, 3), np.float32)], "cannot read a tensor from str"),
])
def test_builder_rejects_bad_cases(inputs, outputs, match):
    with pytest.raises(ValueError, match=match):
        linear_builder().add_bundled_case("forward", inputs, outputs)


def test_builder_rejects_case_beyond_dynamic_bound_and_unknown_method():
    with pytest.raises(ValueError, match=r"within the bounds \[5, 4\]"):
        linear_builder(dynamic=True).add_bundled_case(
            "forward", [np.zeros((6, 4), np.float32)], [np.zeros((6, 3), np.float32)])
    with pytest.raises(ValueError, match="no method 'other'"):
        linear_builder().add_bundled_case("other", [], [])


# ---- hostile BUNDLE sections ---------------------------------------------------------------

def bundled_program() -> bytes:
    b = linear_builder()
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    b.add_bundled_case("forward", [x], [reference(x)])
    return b.to_bytes()


def edited(data: bytes, offset: int, fmt: str, value) -> bytes:
    raw = bytearray(data)
    struct.pack_into(fmt, raw, offset, value)
    w.fix_checksums(raw)
    return bytes(raw)


CASE = 8          # first case record, from the section start
VALUE = 8 + 16    # first value record (the input), one case


@pytest.mark.parametrize("field,fmt,value,match", [
    (0, "<I", 2, "bundle section claims 2 cases"),
    (4, "<I", 1000, "claims 1 cases and 1000 values"),
    (CASE + 0, "<I", 5, "bundled case 0 belongs to method 5 of 1"),
    (CASE + 4, "<I", 1, "values 1..+2 lie outside the 2 bundle values"),
    (CASE + 8, "<I", 2, "bundled case 0 has 2 inputs and 1 outputs"),
    (VALUE + 0, "<B", 1, "input 0 is of kind 1 but the method's is of kind 7"),
    (VALUE + 1, "<B", 3, "input 0 has dtype .* and rank 3"),
    (VALUE + 2, "<H", 1, "nonzero reserved"),
    (VALUE + 5, "<B", 64, "input 0 has dtype"),
    (VALUE + 8, "<I", 0xFFFFFFF0, "sizes lie outside the word table"),
    (VALUE + 12, "<I", 99, "needs 32 bytes of constant 99"),
    (VALUE + 32 + 12, "<I", 1, "expected output 0 needs 24 bytes of constant 1"),
])
def test_hostile_bundle_fields_are_rejected_with_offsets(field, fmt, value, match):
    data = bundled_program()
    _, offset, _ = sections(data)[9]
    with pytest.raises(rt.InvalidProgram, match=match) as info:
        rt.Program.load(edited(data, offset + field, fmt, value))
    assert "byte offset" in str(info.value)


def test_bundle_sizes_must_fit_the_method():
    data = bundled_program()
    _, offset, _ = sections(data)[9]
    sizes_at = struct.unpack_from("<I", data, offset + VALUE + 8)[0]
    _, words_at, _ = sections(data)[5]
    with pytest.raises(rt.InvalidProgram, match="size 3 of dimension 0 does not fit the "
                                                "method's size 2"):
        rt.Program.load(edited(data, words_at + 8 * sizes_at, "<q", 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_bundle_never_crashes(data_strategy):
    """Any bytes in the BUNDLE section (checksums repaired): a clean error, or cases that read
    and verify without crashing."""
    data = bytearray(bundled_program())
    _, offset, size = sections(bytes(data))[9]
    for _ in range(data_strategy.draw(st.integers(1, 4))):
        at = offset + data_strategy.draw(st.integers(0, size - 1))
        data[at] = data_strategy.draw(st.integers(0, 255))
    w.fix_checksums(data)
    try:
        program = rt.Program.load(bytes(data))
    except rt.InvalidProgram as exc:
        assert "byte offset" in str(exc)
        return
    with program:
        for name in program.method_names:
            cases = program.bundled_tests(name)
            with program.load_method(name) as method:
                for case in cases:
                    try:
                        method.verify_bundled(case.index)
                    except rt.VerificationError:
                        pass


# ---- ONNX: expected outputs from the reference ---------------------------------------------

@pytest.mark.parametrize("reference_name", ["onnx", "auto"])
def test_onnx_convert_bundles_reference_outputs(reference_name):
    pytest.importorskip("onnx")
    from runtime_py import onnx as ro
    from tests import onnx_models

    model = onnx_models.mlp(batch=2)
    xs = [RNG.standard_normal((2, 256)).astype(np.float32) for _ in range(2)]
    data = ro.convert(model, bundle_inputs=[{"x": xs[0]}, [xs[1]]], reference=reference_name)
    from onnx.reference import ReferenceEvaluator

    with rt.Program.load(data) as program:
        cases = program.bundled_tests()
        assert len(cases) == 2
        for case, x in zip(cases, xs):
            (want,) = ReferenceEvaluator(model).run(None, {"x": x})
            np.testing.assert_allclose(np.asarray(case.expected_outputs[0]), want, rtol=1e-5,
                                       atol=1e-5)
        with program.load_method() as forward:
            forward.verify_bundled(0, rtol=1e-4, atol=1e-5)
            forward.verify_bundled(1, rtol=1e-4, atol=1e-5)


def test_onnx_convert_rejects_bad_bundle_inputs():
    pytest.importorskip("onnx")
    from runtime_py import onnx as ro
    from tests import onnx_models

    with pytest.raises(rt.InvalidArgument, match=r"missing inputs \['x'\], unknown inputs "
                                                 r"\['y'\]"):
        ro.convert(onnx_models.mlp(batch=2), bundle_inputs=[{"y": np.zeros((2, 256))}])
    with pytest.raises(rt.InvalidArgument, match="reference must be"):
        ro.convert(onnx_models.mlp(batch=2), bundle_inputs=[[np.zeros((2, 256), np.float32)]],
                   reference="torch")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime_py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_convert_with_cases_then_verify(tmp_path):
    onnx = pytest.importorskip("onnx")
    from tests import onnx_models

    onnx.save(onnx_models.mlp(batch="N"), tmp_path / "mlp.onnx")
    for i in range(2):
        np.savez(tmp_path / f"case{i}.npz",
                 x=RNG.standard_normal((i + 1, 256)).astype(np.float32))
    done = cli("convert", str(tmp_path / "mlp.onnx"), "-o", str(tmp_path / "mlp.rtp"),
               "--dynamic", "x:0=4", "--bundle-inputs", str(tmp_path / "case0.npz"),
               "--bundle-inputs", str(tmp_path / "case1.npz"))
    assert done.returncode == 0, done.stderr
    assert "2 bundled case(s)" in done.stdout
    shown = cli("inspect", str(tmp_path / "mlp.rtp"))
    assert "bundled test cases: 2" in shown.stdout
    checked = cli("verify", str(tmp_path / "mlp.rtp"), "--rtol", "1e-4", "--atol", "1e-5")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "2 passed, 0 failed" in checked.stdout
    assert checked.stdout.count(" pass ") == 2


def test_cli_verify_reports_failures(tmp_path):
    b = linear_builder()
    x = np.ones((2, 4), np.float32)
    b.add_bundled_case("forward", [x], [reference(x)])
    b.add_bundled_case("forward", [x], [reference(x) + 1])
    b.save(tmp_path / "p.rtp")
    out = cli("verify", str(tmp_path / "p.rtp"))
    assert out.returncode == 1
    assert "1 passed, 1 failed" in out.stdout
    assert "FAIL" in out.stdout and "output 0 ('y') differs" in out.stdout
    linear_builder().save(tmp_path / "none.rtp")
    none = cli("verify", str(tmp_path / "none.rtp"))
    assert none.returncode == 1 and "no bundled test cases" in none.stdout


def test_verification_error_pickles():
    import pickle

    err = rt.VerificationError("m", output=1, name="y", index=(0, 2), got=1.0, expected=2.0,
                               tolerance=0.1, mismatched=1, total=4)
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.output, back.index, back.got, back.total) == \
        ("m", 1, (0, 2), 1.0, 4)
    assert not math.isnan(back.tolerance)


def test_module_verify_bundled(tmp_path):
    b = linear_builder()
    x = np.ones((2, 4), np.float32)
    b.add_bundled_case("forward", [x], [reference(x)])
    b.add_bundled_case("forward", [x], [reference(x) * 2 + 1])
    b.save(tmp_path / "p.rtp")
    with rt.load(str(tmp_path / "p.rtp")) as module:
        assert len(module.bundled_tests()) == 2
        assert module.verify_bundled("forward", 0).index == 0
        with pytest.raises(rt.VerificationError, match="bundled case 1"):
            module.verify_bundled("forward", 1, rtol=1e-3, atol=1e-3)
