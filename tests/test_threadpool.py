"""The thread pool under load: tests/c/threadpool_stress.c, built here against the pool's own
sources, runs many parallel loops from several threads at once (nested loops, random sizes,
grains and thread counts, a fork) and parallel runs whose threads take items from each other,
and checks that every index runs exactly once; again under
ThreadSanitizer where the compiler has it. tests/c/threadpool_placement.c checks that a worker
found on its caller's CPU moves to another it is allowed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
POOL_SOURCES = [ROOT / "libruntime" / "core" / "threadpool.c", ROOT / "libruntime" / "core" / "runs.c",
                ROOT / "libruntime" / "core" / "clock.c"]


def build(tmp_path: Path, name: str, flags, test: str = "threadpool_stress.c") -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    exe = tmp_path / name
    result = subprocess.run([compiler, "-std=gnu11", "-O2", "-g", *flags, "-I", str(ROOT / "libruntime"),
                             "-I", str(ROOT / "include"), str(ROOT / "tests" / "c" / test),
                             *map(str, POOL_SOURCES), "-lpthread", "-o", str(exe)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        if flags:
            pytest.skip(f"the compiler cannot build with {flags}: {result.stderr[-300:]}")
        raise AssertionError(result.stderr)
    return exe


def test_threadpool_stress(tmp_path):
    exe = build(tmp_path, "stress", [])
    result = subprocess.run([str(exe), "5000"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_threadpool_stress_under_thread_sanitizer(tmp_path):
    exe = build(tmp_path, "stress_tsan", ["-fsanitize=thread"])
    # TSan cannot follow a fork of a threaded process; the fork is checked above.
    result = subprocess.run([str(exe), "300", "nofork"], capture_output=True, text=True,
                            timeout=300, env={"TSAN_OPTIONS": "halt_on_error=1"})
    assert "WARNING: ThreadSanitizer" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU affinity is Linux's")
@pytest.mark.parametrize("between", ["nap", "sleep"])
def test_worker_on_its_callers_cpu_moves_off(tmp_path, between):
    """Linux wakes a thread near its waker, and a napping worker wakes where it last ran: a
    worker that joins a loop on its caller's CPU must move to another CPU it is allowed (its
    first piece runs there) and stay allowed every CPU it was."""
    exe = build(tmp_path, "placement", [], "threadpool_placement.c")
    result = subprocess.run([str(exe)] + (["sleep"] if between == "sleep" else []),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout.strip()
    if out.startswith("skip:"):
        pytest.skip(out)
    assert out == "ok", out
