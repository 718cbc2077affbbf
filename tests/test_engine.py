"""The execution engine: dynamic shapes, control flow, attributes, memory planning, input
binding, failure recovery, profiling and threads."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from tests.programs import counted_loop, rich_program


def load(builder: ProgramBuilder, name: str = "forward", **options) -> rt.Method:
    return rt.Program.load(builder.to_bytes()).load_method(name, **options)


# ---- dynamic shapes -----------------------------------------------------------------------

def dynamic_mlp():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (None, 4), max_shape=(16, 4))
    y = m.softmax(m.relu(m.linear(x, m.constant(w))), axis=1)
    m.output(m.transpose(y, [1, 0]), "yt")
    return b, w


@pytest.mark.parametrize("batch", [0, 1, 7, 16])
def test_dynamic_batch_within_bounds(batch):
    b, w = dynamic_mlp()
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    with load(b) as forward:
        (yt,) = forward(x)
        h = np.maximum(x @ w.T, 0)
        e = np.exp(h - h.max(axis=1, keepdims=True)) if batch else h
        ref = (e / e.sum(axis=1, keepdims=True)).T if batch else h.T
        assert yt.shape == (5, batch)
        np.testing.assert_allclose(np.asarray(yt), ref, rtol=1e-5, atol=1e-6)


def test_dynamic_input_above_its_bound_names_input_and_bound():
    b, _ = dynamic_mlp()
    with load(b) as forward:
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\).*at most \[16, 4\]"):
            forward(np.zeros((17, 4), np.float32))
        (yt,) = forward(np.zeros((2, 4), np.float32))  # still usable
        assert yt.shape == (5, 2)


def test_static_shape_mismatch_names_shapes():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2, 3))))
    with load(b) as forward:
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): has shape \[3, 2\], but the method expects \[2, 3\]"):
            forward(np.zeros((3, 2), np.float32))


# ---- control flow -------------------------------------------------------------------------

def power_loop():
    """y = x * 2**n by a loop: i = 0; while i < n: y = y + y; i = i + 1."""
    return counted_loop(3, "double")


@pytest.mark.parametrize("n", [0, 1, 5, 20])
def test_loop_with_backward_jump(n):
    x = np.array([1.0, -2.0, 0.5], np.float32)
    with load(power_loop()) as forward:
        y, i = forward(x, np.array([n], np.int64))
        np.testing.assert_array_equal(np.asarray(y), x * 2.0 ** n)
        assert i.tolist() == [n]


@pytest.mark.parametrize("flag", [False, True])
def test_conditional_jump_on_scalar_input(flag):
    data, _ = rich_program()
    v = np.array([[1.0, 2.0], [3.0, -4.0]])
    with rt.Program.load(data) as program, program.load_method("scale") as scale:
        (out,) = scale(v, flag)
        np.testing.assert_array_equal(np.asarray(out), v * (2 if flag else 1))


def test_loop_carried_values_survive_memory_reuse():
    """The planner must keep values used inside a loop alive across it: a temporary computed
    before the loop and read in every iteration must not be overwritten by loop temporaries."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (64,))
    n = m.input("n", "int64", (1,))
    one = m.constant(np.ones(1, np.int64))
    base = m.relu(x)                 # read in every iteration
    acc = m.tensor("float32", (64,))
    i = m.tensor("int64", (1,))
    m.sub(one, one, out=i)
    m.sub(x, x, out=acc)
    top, done = m.place(m.label()), m.label()
    m.jump_if_not(m.less(i, n), done)
    t = m.mul(base, base)            # loop temporary
    m.add(acc, t, out=acc)
    m.add(i, one, out=i)
    m.jump(top)
    m.place(done)
    m.output(acc)
    x_val = np.linspace(-1, 1, 64, dtype=np.float32)
    with load(b) as forward:
        (acc_out,) = forward(x_val, np.array([3], np.int64))
        np.testing.assert_allclose(np.asarray(acc_out), 3 * np.maximum(x_val, 0) ** 2, rtol=1e-6)


# ---- attributes ---------------------------------------------------------------------------

def test_attributes_persist_across_executions_and_are_writable():
    data, _ = rich_program()
    with rt.Program.load(data) as program, program.load_method("forward") as forward:
        x = np.zeros((1, 3), np.float32)
        for expected in (1, 2, 3):
            forward(x)
            assert forward.get_attribute("calls").tolist() == [expected]
        view = np.asarray(forward.get_attribute("calls"))
        view[0] = 100                       # the caller may reset state between runs
        forward(x)
        assert forward.get_attribute("calls").tolist() == [101]
        with pytest.raises(rt.NotFound, match="no attribute named 'nope'"):
            forward.get_attribute("nope")


def test_attribute_initialised_from_constant():
    b = ProgramBuilder()
    m = b.method("forward")
    state = m.attribute("total", "float32", (2,), init=np.array([10, 20], np.float32))
    x = m.input("x", "float32", (2,))
    m.add(state, x, out=state)
    m.output(m.copy(state))
    with load(b) as forward:
        forward(np.ones(2, np.float32))
        (y,) = forward(np.ones(2, np.float32))
        assert y.tolist() == [12.0, 22.0]


# ---- memory planning ----------------------------------------------------------------------

def test_planner_reuses_memory_and_results_stay_right():
    b = ProgramBuilder()
    m = b.method("forward")
    h = m.input("x", "float32", (256, 256))
    for _ in range(10):
        h = m.relu(m.sub(h, m.constant(np.full(1, 0.5, np.float32))))
    m.output(h)
    planned, unplanned = b.memory_report()["forward"]
    tensor = 256 * 256 * 4
    assert unplanned >= 21 * tensor and planned <= 3 * tensor
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    ref = x.copy()
    for _ in range(10):
        ref = np.maximum(ref - 0.5, 0)
    with load(b) as forward:
        (y,) = forward(x)
        np.testing.assert_array_equal(np.asarray(y), ref)
        assert forward.method_meta.planned_bytes == planned


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "mul", "sub", "relu"]),
                          st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=25))
def test_random_dataflow_graphs_match_numpy(steps):
    """Random DAGs over reused intermediates: any planner overlap would corrupt a result."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4, 8))
    values, refs = [x], [np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)]
    x_val = refs[0]
    for op, i, j in steps:
        a, c = values[i % len(values)], values[j % len(values)]
        ra, rc = refs[i % len(refs)], refs[j % len(refs)]
        if op == "relu":
            values.append(m.relu(a))
            refs.append(np.maximum(ra, 0))
        else:
            values.append(getattr(m, op)(a, c))
            refs.append({"add": np.add, "mul": np.multiply, "sub": np.subtract}[op](ra, rc))
    outs = values[-3:]
    for v in outs:
        m.output(v)
    with load(b) as forward:
        results = forward(x_val)
        for got, want in zip(results, refs[-3:]):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# ---- binding ------------------------------------------------------------------------------

def identity_method():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4, 3))
    m.output(x, "same")
    m.output(m.relu(x), "relu")
    return b


def test_contiguous_input_is_bound_without_copy():
    with load(identity_method(), clone_outputs=False) as forward:
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        same, _ = forward(x)
        assert same.__array_interface__["data"][0] == x.__array_interface__["data"][0]


@pytest.mark.parametrize("make", [
    lambda a: a[::-1],                       # negative strides
    lambda a: np.asfortranarray(a),          # column-major
    lambda a: np.repeat(a, 2, axis=1)[:, ::2],  # non-contiguous
    lambda a: np.broadcast_to(a[:1], (4, 3)),   # zero strides
])
def test_strided_inputs_are_copied_correctly(make):
    base = np.arange(-6, 6, dtype=np.float32).reshape(4, 3)
    x = make(base)
    with load(identity_method(), clone_outputs=False) as forward:
        same, relu = forward(x)
        assert same.__array_interface__["data"][0] != x.__array_interface__["data"][0]
        np.testing.assert_array_equal(np.asarray(same), x)
        np.testing.assert_array_equal(np.asarray(relu), np.maximum(x, 0))


def test_input_written_in_place_is_copied():
    """An input the method writes must never be changed in the caller's memory."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (3,))
    m.add(x, x, out=x)
    m.output(m.copy(x))
    with load(b) as forward:
        x_val = np.array([1, 2, 3], np.float32)
        (y,) = forward(x_val)
        assert y.tolist() == [2, 4, 6] and x_val.tolist() == [1, 2, 3]


# ---- failure and recovery -----------------------------------------------------------------

def test_failed_set_input_leaves_method_usable():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", "float32", (2,)), m.input("b", "float32", (2,))))
    with load(b) as forward:
        a = np.array([1, 2], np.float32)
        forward.set_input(0, a)
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 1 \('b'\): has dtype int64, but the method expects float32"):
            forward.set_input(1, np.array([1, 2], np.int64))
        with pytest.raises(rt.InvalidState, match=r"input 1 \('b'\): is not set"):
            forward.execute()
        forward.set_input(1, np.array([10, 20], np.float32))
        forward.execute()
        assert forward.get_outputs()[0].tolist() == [11.0, 22.0]


def test_wrong_input_count_and_kind():
    data, _ = rich_program()
    with rt.Program.load(data) as program, program.load_method("scale") as scale:
        with pytest.raises(rt.InvalidArgument, match="scale"):
            scale(np.zeros((2, 2)))
        with pytest.raises(rt.InvalidArgument, match=r"input 1 \('double_it'\)"):
            scale(np.zeros((2, 2)), np.zeros((2, 2)))
        (out,) = scale(np.ones((2, 2)), True)
        assert out.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_prepare_rejects_mismatched_dtypes_naming_instruction_and_op():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2,))
    y = m.input("y", "int32", (2,))
    m.output(m.call("add", x, y, outputs=[("float32", (2,), False)])[0])
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(rt.Error, match=r"method 'forward': instruction 0 \(add\)"):
            program.load_method("forward")


def test_memory_limit_is_enforced():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (1024, 1024))))
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(rt.OutOfMemory, match="memory limit"):
            program.load_method("forward", memory_limit=1 << 20)
        program.load_method("forward", memory_limit=1 << 24).close()


@pytest.mark.skipif(rt.backend_available("cuda"), reason="CUDA is available (tests/gpu)")
def test_cuda_is_refused_cleanly_without_backend():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2,))))
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(rt.Unsupported, match="cuda"):
            program.load_method("forward", device="cuda")


# ---- profiling and threads ----------------------------------------------------------------

def test_profile_events_name_each_instruction():
    b = power_loop()
    with load(b, profile=True) as forward:
        forward(np.ones(3, np.float32), np.array([2], np.int64))
        events = forward.profile_events()
        names = [e.op_name for e in events]
        # sub, copy, then per iteration less, add, add; then the final less
        assert names == ["sub", "copy"] + ["less", "add", "add"] * 2 + ["less"]
        assert all(e.end_ns >= e.start_ns for e in events)
        assert [e.instruction for e in events][:3] == [0, 1, 2]


def test_results_equal_across_thread_counts():
    rng = np.random.default_rng(3)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 8, 20, 20))
    h = m.conv2d(x, m.constant(rng.standard_normal((16, 8, 3, 3)).astype(np.float32)), padding=1)
    h = m.matmul(m.reshape(h, [2, 16, 400]), m.constant(rng.standard_normal((400, 30)).astype(np.float32)))
    m.output(h)
    x_val = rng.standard_normal((2, 8, 20, 20)).astype(np.float32)
    program = rt.Program.load(b.to_bytes())
    outs = []
    for threads in (1, 2, 4):
        with program.load_method("forward", num_threads=threads) as forward:
            outs.append(np.asarray(forward(x_val)[0]))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


@pytest.mark.parametrize("shape", [(1,), (4,), (3, 4), (2, 3, 5)])
def test_copied_inputs_survive_repeated_executes(shape):
    """An input the library copies in (a transposed array) lives in the arena: it must hold its
    values through every execute until it is bound anew, not be reused for intermediates."""
    b = ProgramBuilder()
    m = b.method("forward")
    a, bb, c = (m.input(name, "float32", shape) for name in "abc")
    m.output(m.add(m.add(a, bb), c))
    rng = np.random.default_rng(len(shape))
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    arrays[0] = np.array(arrays[0].T, order="C").T  # same values, not row-major: copied
    want = arrays[0] + arrays[1] + arrays[2]
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as f:
        f.set_inputs(*arrays)
        for _ in range(3):
            f.execute()
            np.testing.assert_array_equal(np.asarray(f.get_outputs()[0]), want)
