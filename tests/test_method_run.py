"""rt_method_run (bind every input, execute, view every output in one call) at the C level,
through the cffi declarations: it must do exactly what set_input per input, execute and
output per output do, errors and failure states included."""
from __future__ import annotations

import array

import pytest

from runtime_py._ffi import ffi, get_lib, to_str
from runtime_py.compiler import ProgramBuilder

pytestmark = pytest.mark.core  # no numpy: every interpreter runs it

lib = get_lib()
INVALID_ARGUMENT, INVALID_STATE = 1, 2
INPUT_COPY, ALLOW_MUTATE = 1, 2


def add3_program() -> bytes:
    """forward(a, b, c) = a + b + c over float32[3]."""
    b = ProgramBuilder()
    m = b.method("forward")
    x, y, z = (m.input(n, "float32", (3,)) for n in "abc")
    m.output(m.add(m.add(x, y), z), "sum")
    return b.to_bytes()


def scalars_program() -> bytes:
    """forward(v float64[2], n int, d double, f bool) -> (v + v, n, d, f): the scalar inputs
    come back as scalar outputs."""
    b = ProgramBuilder()
    m = b.method("forward")
    v = m.input("v", "float64", (2,))
    n, d, f = m.input_scalar("n", "int"), m.input_scalar("d", "double"), m.input_scalar("f", "bool")
    m.output(m.add(v, v), "twice")
    for value, name in ((n, "n"), (d, "d"), (f, "f")):
        m.output(value, name)
    return b.to_bytes()


def loop_program() -> bytes:
    """forward(n int64[1]) counts to n with a backward jump: count = n."""
    b = ProgramBuilder()
    m = b.method("forward")
    n = m.input("n", "int64", (1,))
    one = m.constant(array.array("q", [1]), "int64", (1,))
    i = m.tensor("int64", (1,))
    m.sub(one, one, out=i)
    top, done = m.place(m.label()), m.label()
    m.jump_if_not(m.less(i, n), done)
    m.add(i, one, out=i)
    m.jump(top)
    m.place(done)
    m.output(i, "count")
    return b.to_bytes()


class Loaded:
    """A program and one method loaded with the C calls; released at exit."""

    def __init__(self, data: bytes, max_steps: int = 0) -> None:
        self.keep = []
        out = ffi.new("rt_program **")
        assert lib.rt_program_load_buffer(out, data, len(data), 1) == 0, last_error()
        self.program = out[0]
        options = ffi.new("rt_method_options *")
        lib.rt_method_options_init(options)
        options.max_steps = max_steps
        method = ffi.new("rt_method **")
        assert lib.rt_method_load(method, self.program, b"forward", options) == 0, last_error()
        self.m = method[0]
        self.num_inputs = lib.rt_method_input_count(self.m)
        self.num_outputs = lib.rt_method_output_count(self.m)
        self.inputs = ffi.new("rt_tensor[]", self.num_inputs)
        self.outputs = ffi.new("rt_tensor[]", self.num_outputs)

    def __enter__(self) -> "Loaded":
        return self

    def __exit__(self, *exc) -> None:
        lib.rt_method_destroy(self.m)
        lib.rt_program_release(self.program)

    def describe(self, index: int, data, code: int, bits: int, sizes, device=(1, 0)) -> None:
        """inputs[index] := a dense tensor over `data` (a buffer, or None for NULL)."""
        t = self.inputs[index]
        fill(t, data, code, bits, sizes, device, self.keep)

    def io(self, num_inputs=None, num_outputs=None, flags=0, inputs=None, outputs=None):
        io = ffi.new("rt_run_io *")
        io.inputs = self.inputs if inputs is None else inputs
        io.num_inputs = self.num_inputs if num_inputs is None else num_inputs
        io.outputs = self.outputs if outputs is None else outputs
        io.num_outputs = self.num_outputs if num_outputs is None else num_outputs
        io.flags = flags
        self.keep.append(io)
        return io

    def run(self, **kwargs) -> int:
        return lib.rt_method_run(self.m, self.io(**kwargs))

    def floats(self, index: int) -> list:
        t = self.outputs[index]
        return list(ffi.unpack(ffi.cast("float *", t.data), 3))


def fill(t, data, code, bits, sizes, device, keep) -> None:
    sizes_c = ffi.new("int64_t[]", list(sizes) or [0])
    keep.append(sizes_c)
    if data is None:
        t.data = ffi.NULL
    else:
        buf = ffi.from_buffer(data)
        keep.append(buf)
        t.data = buf
    t.device.type, t.device.index = device
    t.rank = len(sizes)
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.sizes = sizes_c
    t.strides = ffi.NULL


def last_error() -> str:
    return to_str(lib.rt_last_error())


def f32(*values) -> array.array:
    return array.array("f", values)


def test_run_binds_executes_and_views_the_outputs():
    with Loaded(add3_program()) as x:
        a, b, c = f32(1, 2, 3), f32(10, 20, 30), f32(100, 200, 300)
        for i, data in enumerate((a, b, c)):
            x.describe(i, data, 2, 32, (3,))
        assert x.run() == 0, last_error()
        assert x.floats(0) == [111, 222, 333]
        out = x.outputs[0]
        assert (out.rank, out.dtype.code, out.dtype.bits, out.device.type) == (1, 2, 32, 1)
        assert out.sizes[0] == 3
        # The same view rt_method_output gives.
        view = ffi.new("rt_tensor *")
        assert lib.rt_method_output(view, x.m, 0) == 0
        assert view.data == out.data and view.sizes == out.sizes
        # Bindings persist: 0 inputs runs on them, and reads the caller's memory again.
        a[0] = 5
        assert x.run(num_inputs=0, inputs=ffi.NULL) == 0, last_error()
        assert x.floats(0) == [115, 222, 333]
        # No output views asked for: the outputs are still there for rt_method_output.
        assert x.run(num_outputs=0, outputs=ffi.NULL) == 0
        assert list(ffi.unpack(ffi.cast("float *", view.data), 3)) == [115, 222, 333]


def echo_program() -> bytes:
    """forward(a, b) -> (a, b, a + b) over float32[3]: outputs 0 and 1 are the inputs."""
    b = ProgramBuilder()
    m = b.method("forward")
    x, y = m.input("a", "float32", (3,)), m.input("b", "float32", (3,))
    m.output(x, "a")
    m.output(y, "b")
    m.output(m.add(x, y), "sum")
    return b.to_bytes()


def test_copy_flag_applies_to_every_tensor_input():
    with Loaded(echo_program()) as x:
        a, b = f32(1, 1, 1), f32(2, 2, 2)
        x.describe(0, a, 2, 32, (3,))
        x.describe(1, b, 2, 32, (3,))
        assert x.run() == 0, last_error()  # bound by pointer: the outputs are the inputs
        assert [x.outputs[i].data == x.inputs[i].data for i in range(2)] == [True, True]
        assert x.run(flags=INPUT_COPY) == 0, last_error()
        assert [x.outputs[i].data == x.inputs[i].data for i in range(2)] == [False, False]
        assert x.floats(0) == [1, 1, 1] and x.floats(1) == [2, 2, 2] and x.floats(2) == [3] * 3


def expected_set_input_error(data: bytes, index: int, fill_args) -> tuple:
    """(status, message) of rt_method_set_input on a fresh method for the same tensor."""
    with Loaded(data) as y:
        t = ffi.new("rt_tensor *")
        fill(t, *fill_args, y.keep)
        status = lib.rt_method_set_input(y.m, index, t, 0)
        return status, last_error()


@pytest.mark.parametrize("case", ["dtype", "rank", "shape", "null data", "device"])
def test_bad_input_fails_as_set_input_does(case):
    good = (f32(1, 2, 3), 2, 32, (3,), (1, 0))
    bad = {"dtype": (array.array("q", [1, 2, 3]), 0, 64, (3,), (1, 0)),
           "rank": (f32(1, 2, 3), 2, 32, (1, 3), (1, 0)),
           "shape": (f32(1, 2), 2, 32, (2,), (1, 0)),
           "null data": (None, 2, 32, (3,), (1, 0)),
           "device": (f32(1, 2, 3), 2, 32, (3,), (2, 0))}[case]
    want = expected_set_input_error(add3_program(), 1, bad)
    assert want[0] == INVALID_ARGUMENT and "input 1 ('b')" in want[1]
    with Loaded(add3_program()) as x:
        x.describe(0, *good)
        x.describe(1, *bad)
        x.describe(2, *good)
        assert (x.run(), last_error()) == want
        assert want[1].startswith("method 'forward': input 1 ('b'): ")


def test_failed_run_binds_like_set_input_calls_and_stays_usable():
    with Loaded(add3_program()) as x:
        old = [f32(1, 1, 1), f32(2, 2, 2), f32(3, 3, 3)]
        for i, data in enumerate(old):
            x.describe(i, data, 2, 32, (3,))
        assert x.run() == 0
        new0, new2 = f32(10, 10, 10), f32(30, 30, 30)
        x.describe(0, new0, 2, 32, (3,))
        x.describe(1, array.array("d", [0, 0, 0]), 2, 64, (3,))  # float64: refused
        x.describe(2, new2, 2, 32, (3,))
        assert x.run() == INVALID_ARGUMENT
        assert "input 1 ('b'): has dtype float64, but the method expects float32" in last_error()
        # Input 0 is bound to the new value, input 1 unset, input 2 still the old one.
        assert lib.rt_method_execute(x.m) == INVALID_STATE
        assert "input 1 ('b'): is not set" in last_error()
        assert lib.rt_method_output(ffi.new("rt_tensor *"), x.m, 0) == INVALID_STATE
        b = f32(20, 20, 20)
        t = ffi.new("rt_tensor *")
        fill(t, b, 2, 32, (3,), (1, 0), x.keep)
        assert lib.rt_method_set_input(x.m, 1, t, 0) == 0
        assert x.run(num_inputs=0) == 0
        assert x.floats(0) == [33, 33, 33]  # new a (10) + b (20) + old c (3)


def test_scalar_inputs_are_0d_tensors_and_scalar_outputs_0d_views():
    with Loaded(scalars_program()) as x:
        v = array.array("d", [1.5, -2.0])
        x.describe(0, v, 2, 64, (2,))
        x.describe(1, array.array("q", [-7]), 0, 64, ())
        x.describe(2, array.array("d", [0.25]), 2, 64, ())
        x.describe(3, bytearray([1]), 6, 8, ())
        assert x.run() == 0, last_error()
        twice, n, d, f = (x.outputs[i] for i in range(4))
        assert list(ffi.unpack(ffi.cast("double *", twice.data), 2)) == [3.0, -4.0]
        views = [(t.rank, t.dtype.code, t.dtype.bits, t.device.type) for t in (n, d, f)]
        assert views == [(0, 0, 64, 1), (0, 2, 64, 1), (0, 6, 8, 1)]
        assert ffi.cast("int64_t *", n.data)[0] == -7
        assert ffi.cast("double *", d.data)[0] == 0.25
        assert ffi.cast("uint8_t *", f.data)[0] == 1
        scalar = ffi.new("rt_scalar *")
        assert lib.rt_method_output_scalar(scalar, x.m, 1) == 0 and scalar.i == -7
        # The conversions rt_method_set_input_scalar allows: an int64 0 / 1 for the bool, an
        # int64 for the double, a bool for the int.
        x.describe(1, bytearray([1]), 6, 8, ())
        x.describe(2, array.array("q", [3]), 0, 64, ())
        x.describe(3, array.array("q", [0]), 0, 64, ())
        assert x.run() == 0, last_error()
        assert ffi.cast("int64_t *", x.outputs[1].data)[0] == 1
        assert ffi.cast("double *", x.outputs[2].data)[0] == 3.0
        assert ffi.cast("uint8_t *", x.outputs[3].data)[0] == 0


@pytest.mark.parametrize("index,data,code,bits,sizes,message", [
    (1, array.array("d", [1.0]), 2, 64, (),
     "input 1 ('n'): expects a int scalar but was given a double"),
    (3, array.array("q", [2]), 0, 64, (),
     "input 3 ('f'): expects a bool scalar but was given a int"),
    (1, array.array("i", [1]), 0, 32, (),
     "input 1 ('n'): is a int scalar: rt_method_run takes it as a 0-d int64"),
    (2, array.array("d", [1.0]), 2, 64, (1,),
     "input 2 ('d'): is a double scalar: rt_method_run takes"),
    (3, None, 6, 8, (), "input 3 ('f'): is a bool scalar: rt_method_run takes it"),
])
def test_bad_scalar_input_names_the_input_and_leaves_it_unset(index, data, code, bits, sizes,
                                                              message):
    with Loaded(scalars_program()) as x:
        good = [(array.array("d", [1.0, 2.0]), 2, 64, (2,)), (array.array("q", [4]), 0, 64, ()),
                (array.array("d", [0.5]), 2, 64, ()), (bytearray([0]), 6, 8, ())]
        for i, args in enumerate(good):
            x.describe(i, *args)
        assert x.run() == 0
        x.describe(index, data, code, bits, sizes)
        assert x.run() == INVALID_ARGUMENT
        assert message in last_error() and last_error().startswith("method 'forward': ")
        assert lib.rt_method_execute(x.m) == INVALID_STATE
        assert f"input {index} " in last_error() and "is not set" in last_error()
        x.describe(index, *good[index])
        assert x.run() == 0, last_error()


def test_scalar_message_matches_set_input_scalar():
    with Loaded(scalars_program()) as x, Loaded(scalars_program()) as y:
        x.describe(1, array.array("d", [1.5]), 2, 64, ())
        x.describe(0, array.array("d", [1.0, 2.0]), 2, 64, (2,))
        assert x.run() == INVALID_ARGUMENT
        via_run = last_error()
        scalar = ffi.new("rt_scalar *", {"kind": 2, "d": 1.5})
        assert lib.rt_method_set_input_scalar(y.m, 1, scalar) == INVALID_ARGUMENT
        assert via_run == last_error()


def test_counts_flags_and_nulls_are_refused_without_touching_bindings():
    with Loaded(add3_program()) as x:
        for i in range(3):
            x.describe(i, f32(i, i, i), 2, 32, (3,))
        assert x.run() == 0
        refused = [
            (dict(num_inputs=2), "rt_method_run was given 2 inputs; the method takes 3"),
            (dict(num_outputs=2), "room for 2 outputs; the method has 1"),
            (dict(inputs=ffi.NULL), "inputs or outputs is NULL with a nonzero count"),
            (dict(outputs=ffi.NULL), "inputs or outputs is NULL with a nonzero count"),
            (dict(flags=8), "unknown flags 0x8"),
        ]
        for kwargs, message in refused:
            assert x.run(**kwargs) == INVALID_ARGUMENT, kwargs
            assert last_error().startswith("method 'forward': ") and message in last_error()
            assert lib.rt_method_execute(x.m) == 0  # every binding as it was
        io = x.io()
        io.reserved = 1
        assert lib.rt_method_run(x.m, io) == INVALID_ARGUMENT and "reserved" in last_error()
        assert lib.rt_method_run(x.m, ffi.NULL) == INVALID_ARGUMENT
        assert "io is NULL" in last_error()
        assert lib.rt_method_run(ffi.NULL, x.io()) == INVALID_ARGUMENT
        assert "method is NULL" in last_error()
        assert x.run() == 0 and x.floats(0) == [3, 3, 3]


def test_failed_execute_leaves_the_method_usable():
    with Loaded(loop_program(), max_steps=40) as x:
        n = array.array("q", [100])
        x.describe(0, n, 0, 64, (1,))
        assert x.run() == INVALID_STATE
        assert "max_steps" in last_error()
        assert lib.rt_method_output(ffi.new("rt_tensor *"), x.m, 0) == INVALID_STATE
        n[0] = 5
        assert x.run() == 0, last_error()
        assert ffi.cast("int64_t *", x.outputs[0].data)[0] == 5


def test_run_needs_no_inputs_for_a_method_without_any():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.constant(f32(1, 2, 3), "float32", (3,)),
                   m.constant(f32(1, 1, 1), "float32", (3,))), "y")
    with Loaded(b.to_bytes()) as x:
        assert x.num_inputs == 0
        assert x.run(inputs=ffi.NULL) == 0, last_error()
        assert x.floats(0) == [2, 3, 4]




def test_memory_limit_bounds_arenas_state_and_scratch_together():
    """memory_limit covers the planned arenas, state, op state and the kernels' scratch
    together: a limit that holds the arenas and not the GEMM's packing scratch beside them is
    refused at load (before, each was held to the limit alone, so a load could use well
    over it)."""
    import re

    import runtime_py as rt

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.matmul(m.input("a", "float32", (256, 256)), m.input("b", "float32", (256, 256))))
    with rt.Program.load(b.to_bytes()) as p:
        planned = p.method_meta().planned_bytes
        with pytest.raises(rt.OutOfMemory) as refused:
            p.load_method(memory_limit=planned)
        found = re.search(r"kernels need (\d+) bytes of scratch beside (\d+) bytes",
                          str(refused.value))
        assert found and int(found.group(2)) == planned, str(refused.value)
        scratch = int(found.group(1))
        assert scratch > 0
        with pytest.raises(rt.OutOfMemory):
            p.load_method(memory_limit=planned + scratch - 1)
        p.load_method(memory_limit=planned + scratch).close()


@pytest.mark.parametrize("strides", [(2 ** 62, 1), (-(2 ** 62), 1), (2 ** 63 - 1,) * 2,
                                     (3, -(2 ** 63))], ids=str)
def test_strides_whose_offsets_overflow_are_refused(strides):
    """Strides whose byte offsets overflow int64 are refused by set_input and rt_tensor_copy,
    naming the input or side (the arithmetic on them overflowed: undefined behaviour, which
    UBSan reported)."""
    import runtime_py as rt

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2, 3))))
    data = array.array("f", [1.0] * 6)
    address = data.buffer_info()[0]
    with rt.Program.load(b.to_bytes()) as p, p.load_method() as f:
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): has strides that reach"):
            f.set_inputs((address, "float32", (2, 3), strides))
    lib = get_lib()
    sizes = ffi.new("int64_t[2]", [2, 3])
    bad = ffi.new("int64_t[2]", list(strides))
    out = array.array("f", [0.0] * 6)

    def tensor(addr, strides_ptr):
        t = ffi.new("rt_tensor *")
        t.data = ffi.cast("void *", addr)
        t.device.type, t.device.index = 1, 0
        t.rank = 2
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.sizes = sizes
        t.strides = strides_ptr
        return t

    status = lib.rt_tensor_copy(tensor(out.buffer_info()[0], ffi.NULL), tensor(address, bad))
    assert status != 0
    assert "src has strides that reach past any address" in to_str(lib.rt_last_error())
    assert list(out) == [0.0] * 6
