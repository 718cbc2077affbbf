"""Memory: load / run / close cycles keep RSS flat, and objects dropped without close() are
released by their ffi.gc destructors. (The C-level check, valgrind over the fuzz driver, is
`python3 tests/fuzz/run.py --valgrind`; see docs/reliability.md.)"""
from __future__ import annotations

import gc
import os
import platform
import weakref

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from tests.fuzz.seeds import attributes_and_scalars, cnn

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="needs /proc to read RSS")

MB = 1 << 20
# Under ASan (quarantine) or TSan (shadow memory) freed memory does not come back to the
# process at once: RSS bounds only mean something in an ordinary build. The sanitizers have
# their own leak checks.
SANITIZED = any(s in os.environ.get("LD_PRELOAD", "") for s in ("asan", "tsan"))


def assert_rss_growth_below(grown: int, limit: int, what: str) -> None:
    if not SANITIZED:
        assert grown < limit, f"RSS grew by {grown / MB:.1f} MB {what}"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(platform.python_implementation() == "PyPy",
                    reason="PyPy's garbage collector moves RSS by tens of MB between "
                           "collections (measured here: -21 to +43 MB per 5000 cycles), far "
                           "above any leak this could catch; the C side is checked under "
                           "CPython and LeakSanitizer, object lifetimes by the weakref tests")
def test_load_run_close_10000_times_keeps_rss_flat():
    data = cnn()
    extra = attributes_and_scalars()
    image = np.random.default_rng(0).standard_normal((1, 2, 8, 8)).astype(np.float32)
    with rt.Program.load(data) as p, p.load_method() as m:
        want = np.asarray(m(image)[0]).copy()

    def cycle(i):
        with rt.Program.load(data) as program, program.load_method() as method:
            (features,) = method(image)
            if i % 1000 == 0:
                np.testing.assert_array_equal(np.asarray(features), want)
        if i % 10 == 0:  # a second program: attributes, scalars, a failing call
            with rt.Program.load(extra) as program, program.load_method("scale") as scale:
                scale(np.ones((2, 2)), True, 3, 0.5)
                with pytest.raises(rt.InvalidArgument):
                    scale(np.ones((3, 2)), True, 3, 0.5)

    for i in range(1000):  # warm up: allocator pools, caches, lazily started threads
        cycle(i)
    gc.collect()
    before = rss()
    for i in range(10000):
        cycle(i)
    gc.collect()
    grown = rss() - before
    # A leak of even one small block per cycle would be over 1 MB; allow noise.
    assert_rss_growth_below(grown, 4 * MB, "over 10000 cycles")


def big_program() -> bytes:
    """A method whose arena holds 16 MB that a call touches completely."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "uint8", (16 * MB,))
    m.output(m.add(x, x))
    return b.to_bytes()


def test_dropped_objects_are_released_by_the_garbage_collector():
    data = big_program()
    x = np.ones(16 * MB, np.uint8)
    refs = []

    def drop_without_close():
        program = rt.Program.load(data)
        method = program.load_method(clone_outputs=False)
        (view,) = method(x)  # a view keeps its method alive until it goes too
        assert int(np.asarray(view)[0]) == 2
        refs.extend(weakref.ref(o) for o in (program, method, view))

    drop_without_close()  # warm up
    gc.collect()
    before = rss()
    for _ in range(30):
        drop_without_close()
        gc.collect()
    # PyPy frees an object numpy has looked at one collection later (see docs/python.md).
    gc.collect()
    assert all(r() is None for r in refs), "a Program, Method or Tensor is still alive"
    grown = rss() - before
    # Each leaked method would keep 32 MB of touched arena (input copy and output).
    assert_rss_growth_below(grown, 32 * MB, "over 30 dropped methods: not destroyed")


def test_reference_cycles_through_outputs_are_collected():
    """A method whose output view is stored on the method itself: only the cycle collector can
    free it, and its destructor must still run."""
    data = big_program()
    x = np.ones(16 * MB, np.uint8)
    gc.collect()
    before = rss()
    for _ in range(20):
        program = rt.Program.load(data)
        method = program.load_method(clone_outputs=False)
        method.cycle = method(x)  # method -> view -> method
        ref = weakref.ref(method)
        del program, method
        gc.collect()
        assert ref() is None
    grown = rss() - before
    assert_rss_growth_below(grown, 32 * MB, "over 20 collected cycles")
