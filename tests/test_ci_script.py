"""ci.py judges a test run by pytest's exit status as well as its summary line: a process that
prints "N passed" and then dies (a sanitizer's report at exit, a crash in a finalizer) fails
CI. The "interpreter" here is a shell script standing in for python -m pytest."""
from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def ci(monkeypatch):
    spec = importlib.util.spec_from_file_location("ci_under_test", ROOT / "ci.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "results", [])
    monkeypatch.setattr(module, "failures", [])
    return module


def fake_python(tmp_path: Path, ending: str) -> Path:
    """A stand-in interpreter: answers ci.version_of's -c query, else prints a pytest summary
    and ends with `ending` (a shell command)."""
    if sys.platform == "win32":
        pytest.skip("a POSIX shell script stands in for the interpreter")
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = "-c" ]; then echo "cpython 3.11.0 (fake)"; exit 0; fi\n'
                      'echo "........."\n'
                      'echo "9 passed in 0.12s"\n'
                      f"{ending}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_clean_run_passes(ci, tmp_path):
    ci.pytest("fake", fake_python(tmp_path, "exit 0"), [], source_tree=False, selection="full")
    (result,) = ci.results
    assert result["ok"] and result["passed"] == 9 and result["exit"] == 0
    assert ci.failures == []


def test_a_crash_at_exit_after_the_summary_fails(ci, tmp_path):
    ci.pytest("asan", fake_python(tmp_path, "kill -SEGV $$"), [], source_tree=False,
              selection="subset")
    (result,) = ci.results
    assert result["passed"] == 9  # the summary alone would have called this a pass
    assert not result["ok"] and result["exit"] == -11
    assert ci.failures == ["asan: pytest failed (exit status -11, killed by signal 11)"]


def test_a_nonzero_exit_after_the_summary_fails(ci, tmp_path):
    ci.pytest("pypy", fake_python(tmp_path, "exit 3"), [], source_tree=False, selection="full")
    assert not ci.results[0]["ok"]
    assert ci.failures == ["pypy: pytest failed (exit status 3)"]


def test_exit_zero_with_nothing_run_fails(ci, tmp_path):
    script = fake_python(tmp_path, "exit 0")
    script.write_text(script.read_text().replace("9 passed in 0.12s", "no tests ran in 0.01s"))
    ci.pytest("others", script, [], source_tree=False, selection="core")
    assert not ci.results[0]["ok"] and ci.failures
