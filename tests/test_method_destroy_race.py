"""rt_method_destroy while another thread executes the method (tests/c/method_destroy_race.c):
the call finishes and frees the method as it returns. In CI's sanitizer step the library is the
AddressSanitizer build (RUNTIME_PY_LIBRARY, the sanitizer runtime preloaded), so a use after
free fails the run; elsewhere the test checks that every such execute completes."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime_py import _ffi
from tests.programs import counted_loop

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("numpy")  # tests/programs builds its constants with numpy


def test_destroy_during_execute_frees_after_the_call(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    _ffi.get_lib()
    library = Path(_ffi.library_path())
    exe = tmp_path / "method_destroy_race"
    build = subprocess.run([compiler, "-std=gnu11", "-O1", "-g", "-I", str(ROOT / "include"),
                            str(ROOT / "tests" / "c" / "method_destroy_race.c"), str(library),
                            f"-Wl,-rpath,{library.parent}", "-lpthread", "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    program = tmp_path / "loop.rtp"
    program.write_bytes(counted_loop(64, "power").to_bytes())
    run = subprocess.run([str(exe), str(program), "40"], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ))
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
    assert "AddressSanitizer" not in run.stderr, run.stderr[-3000:]
