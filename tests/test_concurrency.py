"""Threads: one Program shared by many threads, one Method per thread running in parallel (the
GIL is released during execute), and a clear InvalidState for two threads on one Method.

The same file runs under ThreadSanitizer (docs/reliability.md):

    python3 build.py --sanitize thread
    PY=$(python3 -c "import sys; print(sys.executable)")   # not a pyenv shell shim
    LD_PRELOAD=$(gcc -print-file-name=libtsan.so) RUNTIME_PY_LIBRARY=build/thread/libruntime.so \
        TSAN_OPTIONS=halt_on_error=1 $PY -m pytest -q -p no:cacheprovider tests/test_concurrency.py
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import runtime_py as rt
from runtime_py._ffi import ffi, get_lib, to_str
from runtime_py.compiler import ProgramBuilder
from tests.programs import counted_loop

THREADS = 8


def mlp_program() -> bytes:
    """Big enough that matmul, linear and softmax split their work over the thread pool."""
    rng = np.random.default_rng(7)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (64, 96))
    w1 = m.constant(rng.standard_normal((96, 128)).astype(np.float32))
    w2 = m.constant(rng.standard_normal((32, 128)).astype(np.float32))
    bias = m.constant(rng.standard_normal(32).astype(np.float32))
    h = m.relu(m.matmul(x, w1))
    y = m.softmax(m.linear(h, w2, bias), axis=-1)
    m.output(y, "y")
    m.output(m.transpose(h, [1, 0]), "ht")
    return b.to_bytes()


def spin_program() -> bytes:
    """y = x ** (n + 1) by a loop of n iterations: a method that runs as long as asked."""
    return counted_loop(64, "power").to_bytes()


@pytest.fixture(scope="module")
def spin():
    """(method factory, iteration count for a call of at least 0.1 s on this machine)."""
    program = rt.Program.load(spin_program())
    x = np.ones(64, np.float32)
    with program.load_method() as m:
        n = 1000
        while True:
            start = time.perf_counter()
            m(x, np.array([n]))
            if time.perf_counter() - start >= 0.1 or n >= 1 << 26:
                break
            n *= 2
    yield program, n
    program.close()


def test_shared_program_many_threads_match_serial_results():
    program = rt.Program.load(mlp_program())
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal((64, 96)).astype(np.float32) for _ in range(6)]
              for _ in range(THREADS)]
    with program.load_method() as serial:
        expected = [[[np.asarray(o).copy() for o in serial(x)] for x in xs] for xs in inputs]
    results = [None] * THREADS
    errors = []
    barrier = threading.Barrier(THREADS)

    def worker(k):
        try:
            with program.load_method() as method:
                barrier.wait()
                results[k] = [[np.asarray(o).copy() for o in method(x)] for x in inputs[k]]
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    program.close()
    assert not errors, errors
    for k in range(THREADS):
        for got, want in zip(results[k], expected[k]):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)  # bitwise: same kernels, same threads


def test_execute_releases_the_gil(spin):
    """While one thread is inside a long execute, other threads run Python and other methods."""
    program, n = spin
    x = np.full(64, 1.0001, np.float32)
    long_method = program.load_method()
    short_method = program.load_method()
    started = threading.Event()
    span = []

    def long_call():
        started.set()
        t0 = time.perf_counter()
        long_method(x, np.array([n]))
        span.append((t0, time.perf_counter()))

    thread = threading.Thread(target=long_call)
    thread.start()
    started.wait()
    stamps = []
    while thread.is_alive() and len(stamps) < 50:
        (y, i) = short_method(x, np.array([3]))
        stamps.append(time.perf_counter())
        assert i.tolist() == [3]
    thread.join()
    (t0, t1), = span
    inside = [s for s in stamps if t0 < s < t1]
    assert len(inside) >= 2, "no other call completed while the long execute ran"
    long_method.close()
    short_method.close()


def overlap(method_call, busy_call, attempts=8):
    """Run method_call in a thread and busy_call in this one while it runs; returns the
    results of busy_call (an exception or a value) for the attempts that overlapped."""
    seen = []
    for _ in range(attempts):
        started = threading.Event()
        box = []

        def run():
            started.set()
            try:
                box.append(method_call())
            except BaseException as exc:
                box.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        started.wait()
        time.sleep(0.01)
        if thread.is_alive():
            try:
                seen.append(busy_call())
            except BaseException as exc:
                seen.append(exc)
        thread.join()
        assert not isinstance(box[0], BaseException), box[0]
        if any(isinstance(s, rt.InvalidState) for s in seen):
            break
    return seen


def test_same_method_from_two_threads_is_a_clear_invalid_state(spin):
    program, n = spin
    x = np.full(64, 1.0, np.float32)
    with program.load_method() as method:
        seen = overlap(lambda: method(x, np.array([n])), lambda: method(x, np.array([1])))
        errors = [s for s in seen if isinstance(s, BaseException)]
        assert errors, "the calls never overlapped"
        for e in errors:
            assert isinstance(e, rt.InvalidState), e
            assert "'forward'" in str(e) and "another thread" in str(e)
        # Every entry point refuses while busy; afterwards the method is fine.
        for call in (lambda: method.set_input(0, x), lambda: method.execute(),
                     lambda: method.get_outputs(), lambda: method.close()):
            got = overlap(lambda: method(x, np.array([n])), call)
            assert any(isinstance(g, rt.InvalidState) for g in got), got
        y, i = method(x * 2, np.array([2]))
        assert i.tolist() == [2]
        np.testing.assert_array_equal(np.asarray(y), (x * 2) ** 3)


def test_c_busy_flag_refuses_a_second_thread(spin):
    """Below the Python lock: rt_method_* on one handle from two threads at once."""
    program, n = spin
    lib = get_lib()
    method = program.load_method()
    method.set_inputs(np.full(64, 1.0, np.float32), np.array([n]))
    ptr = method._ptr
    statuses = []
    messages = []

    def run():
        status = lib.rt_method_execute(ptr)
        statuses.append(status)
        if status:
            messages.append(to_str(lib.rt_last_error()))
        return status

    def second():
        status = lib.rt_method_execute(ptr)
        statuses.append(status)
        if status:
            messages.append(to_str(lib.rt_last_error()))
            raise rt.InvalidState(messages[-1])
        return status

    seen = overlap(run, second)
    assert any(isinstance(s, rt.InvalidState) for s in seen), (seen, statuses, messages)
    assert all("another thread" in msg for msg in messages), messages
    assert lib.rt_method_execute(ptr) == lib.RT_OK  # the flag was released
    method.close()


def test_profile_readers_refuse_while_the_method_runs(spin):
    """rt_method_profile_event reads the event list an execute is growing: it takes the busy
    flag like every other entry point (the count reads 0 meanwhile)."""
    program, n = spin
    lib = get_lib()
    method = program.load_method(profile=True)
    method.set_inputs(np.full(64, 1.0, np.float32), np.array([n]))
    method.execute()
    ptr = method._ptr
    event = ffi.new("rt_profile_event *")

    def read_profile():
        status = lib.rt_method_profile_event(event, ptr, 0)
        if status:
            raise rt.InvalidState(to_str(lib.rt_last_error()))
        return status

    seen = overlap(lambda: lib.rt_method_execute(ptr), read_profile)
    errors = [s for s in seen if isinstance(s, BaseException)]
    assert errors and all("another thread" in str(e) for e in errors), seen
    assert lib.rt_method_profile_event_count(ptr) >= 3 * n  # every step of the loop
    assert lib.rt_method_profile_event(event, ptr, 0) == lib.RT_OK
    method.close()


def test_methods_outlive_a_program_closed_by_another_thread():
    program = rt.Program.load(mlp_program())
    methods = [program.load_method() for _ in range(4)]
    x = np.random.default_rng(3).standard_normal((64, 96)).astype(np.float32)
    want = [np.asarray(o).copy() for o in methods[0](x)]
    errors = []
    barrier = threading.Barrier(len(methods) + 1)

    def worker(method):
        try:
            barrier.wait()
            for _ in range(5):
                for got, w in zip(method(x), want):
                    np.testing.assert_array_equal(np.asarray(got), w)
            method.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(m,)) for m in methods]
    for t in threads:
        t.start()
    barrier.wait()
    program.close()
    for t in threads:
        t.join()
    assert not errors, errors


def test_global_settings_change_while_methods_run():
    """rt_set_num_threads and the log callback are thread-safe against running methods."""
    program = rt.Program.load(mlp_program())
    x = np.random.default_rng(4).standard_normal((64, 96)).astype(np.float32)
    lib = get_lib()
    before = lib.rt_get_num_threads()
    stop = threading.Event()
    errors = []

    def worker():
        try:
            with program.load_method() as method:
                want = [np.asarray(o).copy() for o in method(x)]
                while not stop.is_set():
                    for got, w in zip(method(x), want):
                        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-5, atol=1e-6)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for k in range(40):
            lib.rt_set_num_threads(1 + k % 3)
            time.sleep(0.002)
    finally:
        stop.set()
        for t in threads:
            t.join()
        lib.rt_set_num_threads(before)
        program.close()
    assert not errors, errors


def test_library_unloaded_while_workers_spin_does_not_crash(tmp_path):
    """After a parallel loop the pool's workers spin for a while before they sleep. A process
    that unloads the library then (cffi's dlclose at interpreter exit, or an explicit one) must
    not find them running code that is gone: the library stays mapped (linked -z nodelete)."""
    program = tmp_path / "mlp.rtp"
    program.write_bytes(mlp_program())
    script = f"""
import time
import numpy as np
import runtime_py as rt
from runtime_py._ffi import ffi, get_lib
x = np.ones((64, 96), np.float32)
with rt.Program.load({str(program)!r}) as program:
    method = program.load_method("forward", num_threads=2)
    for _ in range(50):
        method(x)
    method.close()
lib = get_lib()
method = rt.Program.load({str(program)!r}).load_method("forward", num_threads=2)
method(x)
ffi.dlclose(lib)   # the workers are spinning inside the library now
time.sleep(0.05)
print("survived")
"""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "survived" in done.stdout


# The system call a thread is blocked in, as /proc/<pid>/task/<tid>/syscall gives it.
_SLEEP_CALLS = {"x86_64": {"nanosleep": {35, 230}, "futex": {202}},
                "aarch64": {"nanosleep": {101, 115}, "futex": {98}}}


def _worker_states():
    """'running', 'nanosleep', 'futex' or the call's number, for each of the pool's workers."""
    calls = _SLEEP_CALLS[platform.machine()]
    states = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "rt-worker":
                    continue
            with open(f"/proc/self/task/{tid}/syscall") as f:
                first = f.read().split()[0]
        except OSError:  # the thread ended, or /proc/.../syscall is not readable here
            continue
        if first == "running":
            states.append("running")
            continue
        number = int(first)
        states.append(next((name for name, numbers in calls.items() if number in numbers),
                           number))
    return states


def _wait_for_workers(want, seconds):
    """Poll until every worker is in one of `want`; the states last seen."""
    deadline = time.monotonic() + seconds
    while True:
        states = _worker_states()
        if states and all(s in want for s in states):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.005)


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() not in _SLEEP_CALLS,
                    reason="reads Linux /proc syscall numbers of x86-64 or aarch64")
def test_worker_wait_keeps_workers_awake_then_lets_them_sleep():
    """set_worker_wait: after a parallel call the pool's workers spin, then nap (short timed
    sleeps), for the wait, and only then sleep on the pool's condition variable (a futex)."""
    if not _worker_states_readable():
        pytest.skip("/proc/self/task/*/syscall is not readable here")
    x = np.ones((64, 96), np.float32)
    with rt.Program.load(mlp_program()) as program:
        method = program.load_method("forward", num_threads=2)
        try:
            rt.set_worker_wait(0)  # sleep as soon as a loop ends
            method(x)
            assert set(_wait_for_workers({"futex"}, 10.0)) == {"futex"}
            rt.set_worker_wait(30.0)
            method(x)
            # The call woke them; on a loaded VM a woken worker may not have run yet (still in
            # its futex call), and the caller then did the work alone. Once each has run, they
            # stay awake (spinning or napping) well past the old 1 ms spin, never asleep.
            awake = _wait_for_workers({"running", "nanosleep"}, 10.0)
            assert awake and set(awake) <= {"running", "nanosleep"}, awake
            seen = set()
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                seen.update(_worker_states())
                time.sleep(0.01)
            assert "futex" not in seen and seen & {"running", "nanosleep"}, seen
            rt.set_worker_wait(0.05)
            method(x)  # this loop's wait is 50 ms: then they sleep
            assert set(_wait_for_workers({"futex"}, 10.0)) == {"futex"}
        finally:
            rt.set_worker_wait(-1)
        assert np.isfinite(np.asarray(method(x)[0])).all()


def _worker_states_readable():
    x = np.ones((64, 96), np.float32)
    with rt.Program.load(mlp_program()) as program:
        program.load_method("forward", num_threads=2)(x)
    try:
        return bool(_worker_states())
    except (KeyError, ValueError):
        return False


def test_set_worker_wait_refuses_nan_and_takes_any_number():
    with pytest.raises(rt.InvalidArgument, match="NaN"):
        rt.set_worker_wait(float("nan"))
    for seconds in (0, 1e-7, 0.25, 1e30, float("inf"), -1, float("-inf")):
        rt.set_worker_wait(seconds)
    rt.set_worker_wait(-1)


PROGRAM_CALLS = """
import os, random, sys, tempfile, threading, time, runtime_py as rt
from tests.test_concurrency import mlp_program
sys.setswitchinterval(1e-6)  # switch threads often: inside the calls, not between them
# A mapped file: releasing the program unmaps its tables, so a use after release faults.
fd, data = tempfile.mkstemp(suffix=".rtp")
os.write(fd, mlp_program())
os.close(fd)
calls = [lambda p: p.method_meta("forward"), lambda p: p.instruction_ops("forward"),
         lambda p: p.bundled_tests("forward"), lambda p: p.constant_bytes,
         lambda p: p.load_method("forward").close()]
errors = []
for round_ in range(200):
    program = rt.Program.load(data)
    program._metas.clear()
    start = threading.Barrier(4)

    def work(call):
        start.wait()
        for _ in range(20):
            try:
                program._metas.clear()  # read from the C program each time
                call(program)
            except rt.ClosedError:
                pass
            except Exception as e:  # anything else is a failure
                errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(calls[(round_ + k) % len(calls)],))
               for k in range(3)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(random.random() * 1e-3)
    program.close()
    for t in threads:
        t.join()
os.unlink(data)
print("errors:", errors[:3], len(errors))
sys.exit(1 if errors else 0)
"""


def test_program_close_while_other_threads_call_it():
    """Closing a program while other threads are inside its calls (metadata, instruction
    ops, bundled tests, load_method) lets those calls finish on a handle kept alive for them;
    calls that start after close raise ClosedError. It was a SIGSEGV at the first try."""
    result = subprocess.run([sys.executable, "-c", PROGRAM_CALLS],
                            cwd=Path(__file__).resolve().parents[1],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.returncode, result.stdout[-2000:],
                                    result.stderr[-2000:])


def test_one_module_serves_many_threads():
    """Module.forward from 8 threads at once: every call succeeds with the serial result
    (each takes an idle method instance, loading another when all are busy); before, 86% of
    the calls got InvalidState."""
    module = rt.load(mlp_program())
    xs = [np.random.default_rng(i).standard_normal((64, 96)).astype(np.float32)
          for i in range(8)]
    with rt.Program.load(mlp_program()) as p, p.load_method() as serial:
        want = [np.asarray(serial(x)[0]) for x in xs]
    start = threading.Barrier(8)
    failures = []

    def work(k):
        start.wait()
        for _ in range(50):
            try:
                y, _ = module.forward(xs[k])
                np.testing.assert_array_equal(np.asarray(y), want[k])
            except Exception as e:
                failures.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    instances = module._idle["forward"]
    assert 1 <= len(instances) <= 8
    module.close()
    assert all(m.closed for m in instances)


def test_module_close_while_threads_call_it():
    """Module.close() while other threads are inside forward(): calls that start later raise
    ClosedError, the running ones finish, and every instance ends closed (before, close raised
    and left the module marked closed with its method open and serving)."""
    for _ in range(20):
        module = rt.load(mlp_program())
        x = np.ones((64, 96), np.float32)
        module.forward(x)
        seen = module._idle["forward"][:]
        start, outcomes = threading.Barrier(5), []

        def work():
            start.wait()
            for _ in range(30):
                try:
                    module.forward(x)
                    outcomes.append("ok")
                except rt.ClosedError:
                    outcomes.append("closed")
                except Exception as e:
                    outcomes.append(repr(e))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        start.wait()
        module.close()
        for t in threads:
            t.join()
        assert set(outcomes) <= {"ok", "closed"}, set(outcomes)
        assert module.closed and all(m.closed for m in seen)
        with pytest.raises(rt.ClosedError):
            module.forward(x)
