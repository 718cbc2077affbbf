"""The thread pool under load: tests/c/threadpool_stress.c, built here against the pool's own
sources, runs many parallel loops from several threads at once (nested loops, random sizes,
grains and thread counts, a fork) and parallel runs whose threads take items from each other,
and checks that every index runs exactly once; again under
ThreadSanitizer where the compiler has it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "tests" / "c" / "threadpool_stress.c", ROOT / "libruntime" / "core" / "threadpool.c",
           ROOT / "libruntime" / "core" / "runs.c", ROOT / "libruntime" / "core" / "clock.c"]


def build(tmp_path: Path, name: str, flags) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    exe = tmp_path / name
    result = subprocess.run([compiler, "-std=gnu11", "-O2", "-g", *flags, "-I", str(ROOT / "libruntime"),
                             "-I", str(ROOT / "include"), *map(str, SOURCES), "-lpthread", "-o", str(exe)],
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
