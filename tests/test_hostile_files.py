"""Files that are not what a loader expects, each probe in a subprocess with a time limit so a
hang fails the test instead of stalling the suite."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def probe(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def _program(tmp_path: Path) -> Path:
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2,))))
    path = tmp_path / "relu.rtp"
    b.save(path)
    return path


@pytest.mark.parametrize("call", ["rt.Program.load({fifo!r})", "rt.load({fifo!r}).method_names",
                                  "rt.Program.load({program!r}, data_files={fifo!r})",
                                  "rt.load({program!r}, data_files=[{fifo!r}]).forward([1, 2])"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, call):
    """Opening a FIFO for reading waits for a writer: the loaders refuse it by its kind
    before reading (it used to block forever)."""
    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    code = ("import runtime_py as rt\n"
            "try:\n"
            f"    {call.format(fifo=fifo, program=str(_program(tmp_path)))}\n"
            "except rt.Error as e:\n"
            "    print(type(e).__name__, e)\n")
    try:
        result = probe(code)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{call} blocked on a FIFO")
    assert result.returncode == 0, result.stderr
    assert "not a regular file" in result.stdout and fifo in result.stdout, result.stdout


REWRITE_PROBE = """
import os, sys, array, runtime_py as rt
from runtime_py.compiler import ProgramBuilder
b = ProgramBuilder()
for name in ("forward", "second"):
    m = b.method(name)
    x = m.input("x", "float32", (4,))
    m.output(m.add(m.relu(x), x))
path = sys.argv[1]
b.save(path)
p = rt.Program.load(path)           # verified here
size = os.path.getsize(path)
with open(path, "r+b") as f:        # then rewritten in place, same size, by someone else
    f.write(bytes([0xA5]) * size)
got = []
for name in ("forward", "second"):  # methods load from the tables verified above
    with p.load_method(name) as f:
        (y,) = f(array.array("f", [-1.0, 2.0, -3.0, 4.0]))
        got.append(y.tolist())
assert got == [[-1.0, 4.0, -3.0, 8.0]] * 2, got
print("ok")
"""


def test_a_program_file_rewritten_in_place_after_load_is_not_read_again(tmp_path):
    """The tables of a mapped program are copied into the process before they are verified,
    so rewriting the file in place afterwards cannot put unverified tables in front of
    load_method (it could: a SIGSEGV)."""
    result = subprocess.run([sys.executable, "-c", REWRITE_PROBE, str(tmp_path / "p.rtp")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "ok" in result.stdout, (result.returncode,
                                                              result.stderr[-2000:])
