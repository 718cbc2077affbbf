"""runtime_py imports, builds, loads and runs with numpy unavailable (a fresh interpreter in
which `import numpy` fails)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.core  # the quick subset every interpreter runs

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import array, struct, sys
    sys.modules["numpy"] = None          # any `import numpy` now raises ImportError
    import runtime_py as rt
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 3))
    w = m.constant(struct.pack("<6f", 1, 0, 0, 0, 1, 0), "float32", (2, 3))
    bias = m.constant(array.array("f", [0.5, -0.5]), "float32", (2,))
    y = m.linear(x, w, bias)
    m.output(m.relu(y), "y")
    m.output(m.concat([x, x], axis=0), "xx")
    data = b.to_bytes()

    with rt.Program.load(data) as program:
        meta = program.method_meta("forward")
        assert meta.input_tensor_meta(0).shape == (2, 3), meta
        with program.load_method("forward") as forward:
            for source in (array.array("f", [1, 2, 3, -4, -5, -6]),
                           bytearray(struct.pack("<6f", 1, 2, 3, -4, -5, -6)),
                           memoryview(array.array("f", [1, 2, 3, -4, -5, -6])).cast("B").cast("f", (2, 3))):
                y, xx = forward(source)
                assert y.tolist() == [[1.5, 1.5], [0.0, 0.0]], y.tolist()
                assert xx.shape == (4, 3) and xx.tolist()[3] == [-4.0, -5.0, -6.0]
                assert y.memoryview().tolist() == y.tolist()
            try:
                forward(array.array("d", [0.0] * 6))
            except rt.InvalidArgument as e:
                assert "input 0" in str(e) and "float64" in str(e), e
            else:
                raise AssertionError("float64 input accepted")
    assert sys.modules["numpy"] is None
    print("numpy-free OK")
""")


def test_runs_without_numpy():
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "numpy-free OK" in result.stdout


BUNDLE_AND_DATA_SCRIPT = textwrap.dedent("""
    import array, os, sys, tempfile
    sys.modules["numpy"] = None
    import runtime_py as rt
    from runtime_py.compiler import ProgramBuilder

    def build(variant):
        b = ProgramBuilder()
        m = b.method("forward")
        x = m.input("x", "float32", (2, 2))
        w = m.constant(array.array("f", [1, 2, 3, 4]), "float32", (2, 2))
        y = m.matmul(x, w)
        m.output(m.relu(y) if variant else y, "y")
        # Expected outputs by hand: [[1, -1], [0, 2]] @ [[1, 2], [3, 4]] = [[-2, -2], [6, 8]].
        b.add_bundled_case("forward", [array.array("f", [1, -1, 0, 2])],
                           [array.array("f", [0, 0, 6, 8] if variant else [-2, -2, 6, 8])])
        b.add_bundled_case("forward", [array.array("f", [1, -1, 0, 2])],
                           [array.array("f", [0, 0, 6, 9] if variant else [-2, -2, 6, 9])])
        return b

    tmp = tempfile.mkdtemp()
    data_file = os.path.join(tmp, "w.rtd")
    build(True).save(os.path.join(tmp, "a.rtp"), external_data=data_file)
    size = os.path.getsize(data_file)
    build(False).save(os.path.join(tmp, "b.rtp"), external_data=data_file)
    assert os.path.getsize(data_file) == size  # one shared weight
    for name in ("a.rtp", "b.rtp"):
        with rt.Program.load(os.path.join(tmp, name), data_files=[data_file]) as program:
            cases = program.bundled_tests()
            assert [c.inputs[0].tolist() for c in cases] == [[[1, -1], [0, 2]]] * 2
            with program.load_method() as forward:
                assert forward.verify_bundled(0).outputs[0].tolist()[1] == [6, 8]
                try:
                    forward.verify_bundled(1)
                except rt.VerificationError as e:
                    assert e.index == (1, 1) and e.got == 8.0 and e.expected == 9.0, e
                else:
                    raise AssertionError("a wrong expected output passed")
    try:
        rt.Program.load(os.path.join(tmp, "a.rtp"))
    except rt.NotFound as e:
        assert "none was given" in str(e)
    assert sys.modules["numpy"] is None
    print("bundle and data numpy-free OK")
""")


def test_bundled_cases_and_data_files_without_numpy():
    result = subprocess.run([sys.executable, "-c", BUNDLE_AND_DATA_SCRIPT], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bundle and data numpy-free OK" in result.stdout
