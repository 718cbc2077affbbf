"""The `runtime-py` console script (where the package is installed), and what importing
runtime_py must not drag in: numpy and torch load only when a caller hands them over. Also
DLPack between runtime_py methods alone, which needs neither."""
from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.core  # the quick subset every interpreter runs (no numpy needed)

ROOT = Path(__file__).resolve().parents[1]


def installed_script() -> Path:
    script = Path(sys.executable).parent / "runtime-py"
    if not script.exists():
        pytest.skip("runtime_py is not installed here (no runtime-py script beside python)")
    return script


def add_program(path: Path) -> None:
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", "float32", (2,)), m.input("b", "float32", (2,))), "sum")
    path.write_bytes(b.to_bytes())


def test_console_script_matches_python_m(tmp_path):
    script = installed_script()
    program = tmp_path / "add.rtp"
    add_program(program)
    by_script = subprocess.run([str(script), "inspect", str(program)], capture_output=True,
                               text=True, timeout=120)
    by_module = subprocess.run([sys.executable, "-m", "runtime_py", "inspect", str(program)],
                               capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert by_script.returncode == 0, by_script.stderr
    assert by_script.stdout == by_module.stdout
    assert "input 0 'a': tensor float32 [2]" in by_script.stdout
    helped = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: runtime-py ")
    failed = subprocess.run([str(script), "inspect", str(tmp_path / "missing.rtp")],
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and failed.stderr.startswith("error: ")


IMPORTS = textwrap.dedent("""
    import sys
    import runtime_py
    from runtime_py import Program, Tensor, load
    from runtime_py import _dlpack, _capsule, _inputs
    heavy = sorted(name for name in ("numpy", "torch", "cupy") if name in sys.modules)
    assert not heavy, heavy
    print("imports OK")
""")


def test_import_loads_no_array_library():
    result = subprocess.run([sys.executable, "-c", IMPORTS], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "imports OK" in result.stdout


@pytest.mark.skipif(platform.python_implementation() == "PyPy",
                    reason="PyPy cannot make DLPack capsules (docs/python.md)")
def test_dlpack_between_methods_without_numpy():
    """One method's output, exported as a capsule, is the next one's input: no copy, no numpy."""
    import gc

    import runtime_py as rt
    from runtime_py import _dlpack
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "int32", (3,))
    m.output(m.add(x, x))
    with rt.Program.load(b.to_bytes()) as program, program.load_method() as first, \
            program.load_method() as second:
        (y,) = first(bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00"))
        second.set_input(0, y.__dlpack__(max_version=(1, 0)))
        second.execute()
        assert second.get_outputs()[0].tolist() == [4, 8, 12]
        assert _dlpack.live_exports() == 1  # second's binding holds y
        second.set_input(0, y)
        gc.collect()
        assert _dlpack.live_exports() == 0
