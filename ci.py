#!/usr/bin/env python3
"""Set everything up and run the tests under every interpreter, from one build of the library.

    python3 ci.py                      # everything (what .ci/run calls)
    python3 ci.py --only cpython,pypy  # some steps: cpython, pypy, others, wheel

Steps:
  cpython  .venv (CPython 3.11): `pip install -e '.[test]'` builds libruntime once (CMake via
           scikit-build-core) and places it in runtime_py/, plus torch==2.13.0 (a CPU wheel on
           the machine's disk, for the torch interop tests; this venv only); then the whole
           suite.
  pypy     .venv-pypy (Debian's pypy3, installed with apt-get when missing) with the test
           dependencies but not the package: the suite runs this source tree and that library.
  others   .venv-3.X for every other CPython of pyenv (3.9, 3.10, 3.12, 3.13) with cffi and
           pytest only: the `core` subset, without numpy. A missing one is skipped with a note.
  wheel    `pip wheel .` gives one py3-none-<platform> wheel; it is installed into fresh CPython
           and PyPy venvs outside the tree, where examples/demo.py and the runtime-py script
           run.
  asan     build.py --sanitize address (ASan + UBSan, stopping on any report), then a reduced
           but real subset (format, engine, fuzz regressions, binding fuzz, every op, GEMM,
           Python API, ONNX models, DLPack) with the sanitizer runtimes preloaded.

Only the standard library; runs on Python 3.9+. Ends with one line of totals.
"""
from __future__ import annotations

import argparse
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent
STEPS = ("cpython", "pypy", "others", "wheel", "asan")
# Run against the ASan + UBSan build: the C paths that take hostile input, every op, the engine.
ASAN_FILES = ("tests/test_format.py", "tests/test_engine.py", "tests/test_fuzz_regressions.py",
              "tests/test_binding_fuzz.py", "tests/test_ops.py", "tests/test_gemm.py",
              "tests/test_python_api.py", "tests/test_onnx_models.py", "tests/test_dlpack.py",
              "tests/test_bundled.py", "tests/test_external_data.py", "tests/test_cuda_absent.py",
              "tests/test_method_run.py", "tests/test_method_run_fuzz.py",
              "tests/test_conv_winograd.py", "tests/test_work_stealing.py",
              "tests/test_method_destroy_race.py", "tests/test_ops_quant.py",
              "tests/test_onnx_dynamic.py", "tests/test_executorch_dynamic.py",
              "tests/test_ops_detection.py", "tests/test_vmath.py",
              "tests/test_ops_attention.py", "tests/test_attention_fusion.py",
              "tests/test_generate.py")
OTHER_VERSIONS = ("3.9", "3.10", "3.12", "3.13")
TORCH = "torch==2.13.0"  # the torch interop tests' torch (cpython step only)
CORE_MARK = re.compile(r"^pytestmark\s*=.*\bpytest\.mark\.core\b", re.M)
SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in [\d.]+s", re.M)

results: List[Dict[str, object]] = []
checks: List[str] = []
notes: List[str] = []
failures: List[str] = []


def say(message: str) -> None:
    print(f"ci: {message}", flush=True)


def run(cmd: Sequence[object], *, env: Optional[Dict[str, str]] = None,
        cwd: Optional[Path] = None, capture: bool = False, check: bool = True) -> str:
    """Run a command, echoing its output (and returning it when capture is set)."""
    argv = [str(c) for c in cmd]
    if not capture:
        print("+ " + " ".join(argv), flush=True)
        code = subprocess.call(argv, env=env, cwd=cwd or ROOT)
        if check and code:
            raise subprocess.CalledProcessError(code, argv)
        return ""
    code, out = run_captured(argv, env=env, cwd=cwd)
    if check and code:
        raise subprocess.CalledProcessError(code, argv, out)
    return out


def run_captured(cmd: Sequence[object], *, env: Optional[Dict[str, str]] = None,
                 cwd: Optional[Path] = None) -> Tuple[int, str]:
    """Run a command, echoing its output; its exit status (negative: killed by that signal)
    and its output."""
    argv = [str(c) for c in cmd]
    print("+ " + " ".join(argv), flush=True)
    proc = subprocess.Popen(argv, env=env, cwd=cwd or ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    sys.stdout.flush()
    return proc.wait(), "".join(lines)


def pip_install(python: Path, *args: str) -> None:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip's notes about unreachable local indexes are noise here: keep errors only.
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"+ {python} -m pip install -q {' '.join(args)}", flush=True)
    noise = re.compile(r"^WARNING: Location .* is ignored")
    text = "".join(line for line in proc.stdout.splitlines(True) if not noise.match(line))
    if text.strip():
        print(text, end="" if text.endswith("\n") else "\n", flush=True)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout)


def venv(interpreter: Path, where: Path) -> Path:
    """A virtual environment made by `interpreter` (reused when it is already there)."""
    python = where / "bin" / "python"
    if not python.exists():
        run([interpreter, "-m", "venv", where])
    return python


def version_of(python: Path) -> str:
    code = ("import platform, sys; i = sys.implementation; "
            "v = '%d.%d.%d' % i.version[:3]; "
            "print(i.name + ' ' + (v + ' (Python ' + platform.python_version() + ')' "
            "if i.name != 'cpython' else platform.python_version()))")
    return subprocess.check_output([str(python), "-c", code], text=True).strip()


def test_requirements() -> List[str]:
    """The `test` extra of pyproject.toml, markers included (pip evaluates them)."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib  # 3.11+

        return list(tomllib.loads(text)["project"]["optional-dependencies"]["test"])
    except ImportError:
        block = re.search(r"^test\s*=\s*\[(.*?)\]", text, re.S | re.M)
        assert block, "no test extra in pyproject.toml"
        return re.findall(r'"([^"]+)"', block.group(1))


def core_files() -> List[str]:
    """Test files that mark themselves `pytestmark = pytest.mark.core` (and import without
    numpy): the subset every interpreter runs."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                   if CORE_MARK.search(p.read_text()))
    assert files, "no test file is marked core"
    return files


def pytest(label: str, python: Path, args: Sequence[str], *, source_tree: bool,
           selection: str, env: Optional[Dict[str, str]] = None) -> None:
    """Run pytest and record its counts; source_tree puts this tree on PYTHONPATH; `env`
    (default: this process's, less RUNTIME_PY_LIBRARY) is the environment to run it in."""
    if env is None:
        env = dict(os.environ)
        env.pop("RUNTIME_PY_LIBRARY", None)
    env = dict(env)
    if source_tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    started = time.monotonic()
    code, out = run_captured([python, "-m", "pytest", "-q", *args], env=env)
    seconds = time.monotonic() - started
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "xfailed": 0}
    match = None
    for match in SUMMARY.finditer(out):
        pass
    if match:
        for number, word in re.findall(r"(\d+) (\w+)", match.group("body")):
            word = {"error": "errors", "xpassed": "passed"}.get(word, word)
            counts[word] = counts.get(word, 0) + int(number)
    # Both the exit status and the summary: a process can print "N passed" and then die (a
    # sanitizer's report at exit, a crash in a finalizer), or exit 0 having run nothing.
    ok = code == 0 and match is not None and counts["failed"] == 0 and \
        counts["errors"] == 0 and counts["passed"] > 0 and "Interrupted" not in out
    results.append({"label": label, "version": version_of(python), "selection": selection,
                    "seconds": seconds, "ok": ok, "exit": code, **counts})
    if not ok:
        failures.append(f"{label}: pytest failed (exit status {code}"
                        f"{f', killed by signal {-code}' if code < 0 else ''})")


# ---- steps --------------------------------------------------------------------------------

def find_cpython(version: str) -> Optional[Path]:
    """The newest pyenv CPython X.Y, or None."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for folder in glob.glob(str(root / f"{version}.*")):
        m = re.fullmatch(re.escape(version) + r"\.(\d+)", os.path.basename(folder))
        python = Path(folder) / "bin" / f"python{version}"
        if m and python.exists():
            found.append((int(m.group(1)), python))
    return max(found)[1] if found else None


def main_cpython() -> Path:
    """CPython 3.11: this interpreter when it is 3.11, else pyenv's."""
    if sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11):
        return Path(sys.executable)
    found = find_cpython("3.11")
    if found:
        return found
    notes.append(f"CPython 3.11 not found; the main venv uses {sys.version.split()[0]}")
    return Path(sys.executable)


def step_cpython() -> Path:
    python = venv(main_cpython(), ROOT / ".venv")
    pip_install(python, "-e", ".[test]")  # builds libruntime into runtime_py/ (CMakeLists)
    if version_of(python).startswith("cpython 3.11."):
        # Exactly this version: it installs a CPU build from the machine's disk, where any
        # other would download gigabytes of CUDA. Only here: the torch tests skip elsewhere.
        pip_install(python, TORCH)
    else:
        notes.append("torch tests skipped: the main venv is not CPython 3.11")
    library = ROOT / "runtime_py" / "libruntime.so"
    if not library.exists():
        raise SystemExit(f"ci: the editable install did not place {library}")
    say(f"library built once: {library.relative_to(ROOT)} ({library.stat().st_size} bytes)")
    pytest("cpython", python, [], source_tree=False, selection="full")
    return python


def _debian_packages_missing(*names: str) -> bool:
    if not shutil.which("dpkg-query"):
        return False
    for name in names:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name],
                                capture_output=True, text=True).stdout
        if "install ok installed" not in status:
            return True
    return False


@functools.lru_cache(maxsize=None)
def find_pypy() -> Optional[Path]:
    """pypy3 with venv support: Debian's pypy3 and pypy3-venv, installed when missing."""
    found = shutil.which("pypy3")
    if found and not _debian_packages_missing("pypy3", "pypy3-venv"):
        return Path(found)
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return Path(found) if found else None
    say("installing Debian's pypy3 and pypy3-venv")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "pypy3", "pypy3-venv"]
    if subprocess.call(install, env=env) != 0:
        subprocess.call(["apt-get", "update", "-q"], env=env)
        if subprocess.call(install, env=env) != 0:
            return None
    found = shutil.which("pypy3")
    return Path(found) if found else None


def pypy_venv() -> Optional[Path]:
    pypy = find_pypy()
    if pypy is None:
        return None
    return venv(pypy, ROOT / ".venv-pypy")


def step_pypy() -> None:
    python = pypy_venv()
    if python is None:
        message = "PyPy (pypy3, pypy3-venv) is missing and could not be installed"
        if os.environ.get("CI"):
            failures.append(message)
        notes.append(message + "; its run is skipped")
        return
    requirements = test_requirements()
    try:
        pip_install(python, *requirements)
    except subprocess.CalledProcessError:
        without = [r for r in requirements if not r.startswith("numpy")]
        notes.append("numpy did not install under PyPy: PyPy ran the core subset without it")
        pip_install(python, *without)
        pytest("pypy", python, ["-m", "core", *core_files()], source_tree=True,
               selection="core")
        return
    pytest("pypy", python, [], source_tree=True, selection="full")


def step_others() -> None:
    files = core_files()
    for version in OTHER_VERSIONS:
        interpreter = find_cpython(version)
        if interpreter is None:
            note = f"CPython {version} not found under ~/.pyenv/versions: skipped"
            say("NOTE: " + note)
            notes.append(note)
            continue
        python = venv(interpreter, ROOT / f".venv-{version}")
        pip_install(python, "cffi>=1.15", "pytest>=7")
        pytest(f"cpython{version}", python, ["-m", "core", *files], source_tree=True,
               selection="core")


def step_wheel(cpython: Optional[Path]) -> None:
    """Build the wheel, install it outside the tree into fresh venvs, run the demo there."""
    builder = cpython or venv(main_cpython(), ROOT / ".venv")
    dist = ROOT / "dist"
    for old in dist.glob("runtime_py-*.whl"):
        old.unlink()
    started = time.monotonic()
    pip = [builder, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT]
    run(pip)
    wheels = sorted(dist.glob("runtime_py-*.whl"))
    if len(wheels) != 1 or "-py3-none-" not in wheels[0].name:
        failures.append(f"wheel: expected one py3-none wheel, got {[w.name for w in wheels]}")
        return
    wheel = wheels[0]
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    if "runtime_py/libruntime.so" not in names:
        failures.append(f"wheel: {wheel.name} holds no runtime_py/libruntime.so")
        return
    say(f"wheel {wheel.name} ({wheel.stat().st_size} bytes, {len(names)} files)")
    checks.append(f"wheel: {wheel.name}, one for every interpreter")
    interpreters = [("cpython", main_cpython())]
    pypy = find_pypy()
    if pypy is not None:
        interpreters.append(("pypy", pypy))
    else:
        notes.append("wheel: no PyPy to try the wheel with")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RUNTIME_PY_LIBRARY")}
    with tempfile.TemporaryDirectory(prefix="runtime_py-wheel-") as tmp:
        demo = Path(tmp) / "demo.py"
        shutil.copy2(ROOT / "examples" / "demo.py", demo)
        for label, interpreter in interpreters:
            where = Path(tmp) / f"venv-{label}"
            run([interpreter, "-m", "venv", where])
            python = where / "bin" / "python"
            try:
                pip_install(python, str(wheel), "numpy>=1.21")
                check = ("import sys, runtime_py, runtime_py._ffi as f; f.get_lib(); "
                         "assert runtime_py.__file__.startswith(sys.prefix), runtime_py.__file__; "
                         "assert f.library_path().startswith(sys.prefix), f.library_path(); "
                         "print('installed:', runtime_py.__file__, f.library_path())")
                run([python, "-c", check], env=env, cwd=Path(tmp))
                out = run([python, demo, "--out", Path(tmp) / f"out-{label}"], env=env,
                          cwd=Path(tmp), capture=True)
                ok = "all outputs match numpy" in out
                # The console script the wheel declares ([project.scripts]).
                helped = run([where / "bin" / "runtime-py", "--help"], env=env, cwd=Path(tmp),
                             capture=True)
                ok = ok and helped.startswith("usage: runtime-py ")
            except (subprocess.CalledProcessError, OSError):
                ok = False
            checks.append(f"wheel demo and runtime-py script under {version_of(python)}: "
                          f"{'all outputs match numpy' if ok else 'FAILED'}")
            if not ok:
                failures.append(f"wheel: the demo failed under {label}")
    say(f"wheel check took {time.monotonic() - started:.0f}s")


def step_asan(cpython: Optional[Path]) -> None:
    python = cpython or main_cpython()
    run([python, "build.py", "--sanitize", "address"])
    runtimes = [run(["gcc", f"-print-file-name={name}"], capture=True).strip()
                for name in ("libasan.so", "libubsan.so")]
    env = dict(os.environ, LD_PRELOAD=" ".join(runtimes), ASAN_OPTIONS="detect_leaks=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               RUNTIME_PY_LIBRARY=str(ROOT / "build" / "address" / "libruntime.so"))
    # The venv's python is the interpreter binary itself (a pyenv shim is a shell script, and
    # preloading the sanitizers into a shell breaks it).
    pytest("asan", python, ["-p", "no:cacheprovider", *ASAN_FILES], source_tree=True,
           selection="subset", env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(STEPS),
                        help=f"comma-separated steps to run, of {', '.join(STEPS)}")
    args = parser.parse_args()
    steps = [s for s in args.only.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {', '.join(sorted(unknown))}")
    started = time.monotonic()
    cpython: Optional[Path] = None
    if "cpython" in steps:
        say("== CPython 3.11: build the library once, run the whole suite")
        cpython = step_cpython()
    elif not (ROOT / "runtime_py" / "libruntime.so").exists():
        raise SystemExit("ci: no runtime_py/libruntime.so; run the cpython step first "
                         "(or pip install -e .)")
    if "pypy" in steps:
        say("== PyPy: the whole suite on the same library")
        step_pypy()
    if "others" in steps:
        say("== other CPythons: the core subset, without numpy")
        step_others()
    if "wheel" in steps:
        say("== wheel: build it, install it in fresh venvs, run the demo")
        step_wheel(cpython)
    if "asan" in steps:
        say("== ASan + UBSan build: the sanitizer subset")
        step_asan(cpython)

    wall = time.monotonic() - started
    print()
    say(f"{'run':<12} {'interpreter':<34} {'tests':<6} {'passed':>6} {'failed':>6} "
        f"{'skipped':>7} {'seconds':>7}")
    for r in results:
        say(f"{r['label']:<12} {r['version']:<34} {r['selection']:<6} {r['passed']:>6} "
            f"{int(r['failed']) + int(r['errors']):>6} {r['skipped']:>7} "
            f"{float(r['seconds']):>7.1f}")
    for check in checks:
        say(check)
    for note in notes:
        say("NOTE: " + note)
    for failure in failures:
        say("FAILED: " + failure)
    passed = sum(int(r["passed"]) for r in results)
    failed = sum(int(r["failed"]) + int(r["errors"]) for r in results)
    skipped = sum(int(r["skipped"]) for r in results)
    say(f"wall time {wall / 60:.1f} min")
    say(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
