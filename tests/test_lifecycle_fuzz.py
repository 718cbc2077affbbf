"""Random sequences of the Python API's lifecycle calls, from several threads at once: load a
program (from bytes or a mapped file), load methods, bind, execute, read outputs and views,
export views to numpy, get attributes, pickle, close programs, methods and modules in any
order. Whatever the order, a call either works (and then gives the reference result) or
raises ClosedError / InvalidState; nothing crashes, hangs or returns wrong numbers.

The default run is short; RT_LIFECYCLE_EXAMPLES=N runs N sequences (the sanitizer runs use
thousands)."""
from __future__ import annotations

import os
import pickle
import threading

import pytest

np = pytest.importorskip("numpy")
from hypothesis import HealthCheck, settings, strategies as st  # noqa: E402
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, invariant,  # noqa: E402
                                 rule)

import runtime_py as rt  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

N = 1 << 18  # 1 MiB of float32: arenas of this size are their own mappings, freed at once
ALLOWED = (rt.ClosedError, rt.InvalidState)


def _program() -> bytes:
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (N,))
    y = m.relu(x)
    m.output(y)
    m.output(m.add(y, x))
    return b.to_bytes()


DATA = _program()
X = np.linspace(-1.0, 1.0, N, dtype=np.float32)
WANT = (np.maximum(X, 0), np.maximum(X, 0) + X)


class Lifecycle(RuleBasedStateMachine):
    programs = Bundle("programs")
    methods = Bundle("methods")
    views = Bundle("views")

    def __init__(self):
        super().__init__()
        self.threads = []
        self.failures = []
        self.path = None

    def _guarded(self, fn):
        try:
            fn()
        except ALLOWED:
            pass
        except Exception as e:  # anything else is a bug
            self.failures.append(repr(e))

    def _in_thread(self, fn):
        t = threading.Thread(target=self._guarded, args=(fn,))
        t.start()
        self.threads.append(t)

    @rule(target=programs, mapped=st.booleans())
    def load_program(self, mapped):
        if mapped:
            if self.path is None:
                import tempfile

                fd, self.path = tempfile.mkstemp(suffix=".rtp")
                os.write(fd, DATA)
                os.close(fd)
            return rt.Program.load(self.path)
        return rt.Program.load(DATA)

    @rule(target=methods, program=programs, clone=st.booleans())
    def load_method(self, program, clone):
        try:
            return program.load_method(clone_outputs=clone)
        except ALLOWED:
            return None

    @rule(method=methods)
    def call(self, method):
        if method is None:
            return
        try:
            outputs = method(X)
        except ALLOWED:
            return
        for got, want in zip(outputs, WANT):
            np.testing.assert_array_equal(np.asarray(got), want)

    @rule(target=views, method=methods)
    def view(self, method):
        if method is None:
            return None
        try:
            method.set_inputs(X)
            method.execute()
            return np.asarray(method.get_outputs(clone=False)[0])  # a numpy array of a view
        except ALLOWED:
            return None

    @rule(view=consumes(views))
    def read_view(self, view):
        if view is not None:
            float(view[-1])  # readable whatever happened to its method

    @rule(method=methods)
    def close_method(self, method):
        if method is not None:
            self._guarded(method.close)

    @rule(program=programs)
    def close_program(self, program):
        self._guarded(program.close)

    @rule(method=methods)
    def close_method_in_a_thread(self, method):
        if method is not None:
            self._in_thread(method.close)

    @rule(method=methods)
    def call_in_a_thread(self, method):
        if method is not None:
            self._in_thread(lambda: method(X))

    @rule(program=programs)
    def close_program_in_a_thread(self, program):
        self._in_thread(program.close)

    @rule(program=programs)
    def metadata_in_a_thread(self, program):
        self._in_thread(lambda: (program.method_meta("forward"),
                                 program.instruction_ops("forward")))

    @rule(program=programs)
    def pickle_round_trip(self, program):
        try:
            again = pickle.loads(pickle.dumps(program))
        except ALLOWED:
            return
        with again, again.load_method() as f:
            np.testing.assert_array_equal(np.asarray(f(X)[0]), WANT[0])

    @rule(threads=st.integers(1, 4))
    def module_from_threads(self, threads):
        module = rt.load(DATA)
        for _ in range(threads):
            self._in_thread(lambda: module.forward(X))
        self._in_thread(module.close)

    @invariant()
    def nothing_unexpected(self):
        assert self.failures == []

    def teardown(self):
        for t in self.threads:
            t.join(60)
            assert not t.is_alive(), "a call hung"
        assert self.failures == []
        if self.path is not None:
            os.unlink(self.path)


Lifecycle.TestCase.settings = settings(
    max_examples=int(os.environ.get("RT_LIFECYCLE_EXAMPLES", "25")), stateful_step_count=30,
    deadline=None, suppress_health_check=list(HealthCheck))
test_lifecycle = Lifecycle.TestCase
