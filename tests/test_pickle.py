"""Pickling: Program and Module travel by path (mapped files) or by bytes (buffers), Tensors as
owned copies, so models and results cross process boundaries (multiprocessing,
concurrent.futures). Needs no numpy."""
from __future__ import annotations

import array
import concurrent.futures
import multiprocessing
import os
import pickle

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

pytestmark = pytest.mark.core

ROWS, COLS = 4, 3
WEIGHTS = [0.5, -1.0, 2.0, 1.5, 0.25, -0.75]  # (2, 3)
BIAS = [0.125, -2.0]


def mlp_program() -> bytes:
    """forward(x: float32 (4, 3)) = relu(x @ W.T + b), plus a counter attribute."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (ROWS, COLS))
    w = m.constant(array.array("f", WEIGHTS), "float32", (2, COLS))
    bias = m.constant(array.array("f", BIAS), "float32", (2,))
    m.output(m.relu(m.linear(x, w, bias)), "y")
    return b.to_bytes()


def batch(seed: int) -> array.array:
    return array.array("f", [((seed * 7 + i * 3) % 11) - 5.0 for i in range(ROWS * COLS)])


def reference(x: array.array):
    rows = [list(x[r * COLS:(r + 1) * COLS]) for r in range(ROWS)]
    out = []
    for row in rows:
        out.append([max(0.0, sum(a * w for a, w in zip(row, WEIGHTS[o * COLS:(o + 1) * COLS]))
                        + BIAS[o]) for o in range(2)])
    return out


@pytest.fixture(scope="module")
def program_bytes() -> bytes:
    return mlp_program()


@pytest.fixture
def program_file(tmp_path, program_bytes):
    path = tmp_path / "mlp.rtp"
    path.write_bytes(program_bytes)
    return path


def run(program_or_module, seed: int):
    if isinstance(program_or_module, rt.Program):
        with program_or_module.load_method() as forward:
            (y,) = forward(batch(seed))
    else:
        (y,) = program_or_module.forward(batch(seed))
    return y.tolist()


# ---- Program --------------------------------------------------------------------------------

def test_mapped_program_pickles_by_path(program_file, monkeypatch, tmp_path):
    monkeypatch.chdir(program_file.parent)
    with rt.Program.load("mlp.rtp") as program:  # relative: the pickle holds the absolute path
        assert program.path == str(program_file)
        data = pickle.dumps(program)
        assert len(data) < 200 + len(str(program_file)), "a mapped program pickles by path"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pickle.loads(data) as copy:
        assert copy.path == str(program_file) and not copy.borrowed
        assert run(copy, 1) == reference(batch(1))


def test_mapped_program_reload_needs_the_file(program_file):
    with rt.Program.load(program_file) as program:
        data = pickle.dumps(program)
    program_file.unlink()
    with pytest.raises(rt.RuntimeIOError, match="mlp.rtp"):
        pickle.loads(data)


@pytest.mark.parametrize("make", [bytes, bytearray, lambda d: memoryview(b"xx" + d)[2:]],
                         ids=["bytes", "bytearray", "memoryview"])
def test_buffer_program_pickles_by_bytes(program_bytes, make):
    with rt.Program.load(make(program_bytes)) as program:
        assert program.path is None
        assert program.to_bytes() == program_bytes
        data = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
        assert len(data) >= len(program_bytes)
    with pickle.loads(data) as copy:
        assert copy.path is None and copy.to_bytes() == program_bytes
        assert run(copy, 2) == reference(batch(2))


def test_copied_buffer_pickles_the_bytes_loaded_not_the_callers(program_bytes):
    source = bytearray(program_bytes)
    with rt.Program.load(source) as program:  # copied: the caller may change the buffer now
        source[:] = bytes(len(source))
        with pickle.loads(pickle.dumps(program)) as copy:
            assert copy.to_bytes() == program_bytes
            assert run(copy, 3) == reference(batch(3))


def test_verify_constants_travels(program_bytes):
    with rt.Program.load(program_bytes, verify_constants=True) as program:
        copy = pickle.loads(pickle.dumps(program))
        assert copy._verify_constants and run(copy, 0) == reference(batch(0))


def test_closed_objects_refuse_to_pickle(program_bytes):
    program = rt.Program.load(program_bytes)
    program.close()
    with pytest.raises(rt.ClosedError):
        pickle.dumps(program)
    module = rt.load(program_bytes)
    module.close()
    with pytest.raises(rt.ClosedError):
        pickle.dumps(module)


def test_methods_do_not_pickle(program_bytes):
    with rt.Program.load(program_bytes) as program, program.load_method() as forward:
        with pytest.raises(TypeError, match="pickle its Program or a Module"):
            pickle.dumps(forward)


# ---- Module ---------------------------------------------------------------------------------

@pytest.mark.parametrize("loaded", [False, True], ids=["lazy", "loaded"])
@pytest.mark.parametrize("by_path", [False, True], ids=["bytes", "path"])
def test_module_pickles_with_its_options(program_bytes, program_file, loaded, by_path):
    source = program_file if by_path else bytearray(program_bytes)
    module = rt.load(source, clone_outputs=False, max_steps=100)
    if loaded:
        assert run(module, 4) == reference(batch(4))
    copy = pickle.loads(pickle.dumps(module))
    assert copy.program.path == (str(program_file) if by_path else None)
    (y,) = copy.forward(batch(5))
    assert y.is_view, "clone_outputs=False travelled with the module"
    assert y.tolist() == reference(batch(5))
    copy.close()
    module.close()


# ---- Tensor ---------------------------------------------------------------------------------

def test_tensors_pickle_as_owned_copies(program_bytes):
    with rt.Program.load(program_bytes) as program:
        with program.load_method(clone_outputs=False) as forward:
            (view,) = forward(batch(6))
            assert view.is_view
            copy = pickle.loads(pickle.dumps(view))
        assert not copy.is_view and copy.shape == (ROWS, 2) and copy.dtype == "float32"
        assert copy.tolist() == reference(batch(6))
    owned = rt.Tensor.from_bytes(array.array("q", [1, -2, 3]), "int64", (3,))
    assert pickle.loads(pickle.dumps(owned)).tolist() == [1, -2, 3]
    scalar = rt.Tensor.from_bytes(array.array("d", [2.5]), "float64", ())
    again = pickle.loads(pickle.dumps(scalar))
    assert again.shape == () and again.item() == 2.5


# ---- processes ------------------------------------------------------------------------------

def _forward(module, seed):
    (y,) = module.forward(batch(seed))
    return y  # a Tensor: pickled back as an owned copy


_WORKER_MODULE = None


def _init_worker(module):
    global _WORKER_MODULE
    _WORKER_MODULE = module


def _forward_in_worker(seed):
    (y,) = _WORKER_MODULE.forward(batch(seed))
    return os.getpid(), y.tolist()


def _contexts():
    methods = multiprocessing.get_all_start_methods()
    return [m for m in ("fork", "spawn") if m in methods]


# Debian's PyPy 7.3.11 renamed ProcessPoolExecutor._adjust_process_count in a backport but not
# its caller, so its executors fail on every start method but fork (not a runtime_py matter).
_EXECUTOR_BROKEN = not hasattr(concurrent.futures.ProcessPoolExecutor, "_adjust_process_count")


@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork.*:DeprecationWarning")
@pytest.mark.parametrize("method", _contexts())
@pytest.mark.parametrize("by_path", [False, True], ids=["bytes", "path"])
def test_process_pool_executor(program_bytes, program_file, method, by_path):
    if method != "fork" and _EXECUTOR_BROKEN:
        pytest.skip("this interpreter's ProcessPoolExecutor only works with fork "
                    "(Debian PyPy 7.3.11 lacks _adjust_process_count)")
    module = rt.load(program_file if by_path else program_bytes)
    local = [run(module, seed) for seed in range(8)]  # the parent has used the library too
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        results = list(pool.map(_forward, [module] * 8, range(8)))
    assert [y.tolist() for y in results] == local
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context, initializer=_init_worker,
                                                initargs=(module,)) as pool:
        results = list(pool.map(_forward_in_worker, range(8)))
    assert [y for _, y in results] == local
    assert os.getpid() not in {pid for pid, _ in results}
    module.close()


@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork.*:DeprecationWarning")
@pytest.mark.parametrize("method", _contexts())
def test_multiprocessing_pool(program_bytes, method):
    program = rt.Program.load(program_bytes)
    local = [run(program, seed) for seed in range(6)]
    with multiprocessing.get_context(method).Pool(2) as pool:
        results = pool.starmap(_run_program, [(program, seed) for seed in range(6)])
    assert results == local


def _run_program(program, seed):
    return run(program, seed)


# ---- programs with data files ---------------------------------------------------------------

@pytest.mark.parametrize("by_path", [False, True], ids=["bytes", "path"])
def test_program_with_data_file_pickles_by_paths(tmp_path, by_path):
    """The program travels by path or bytes, its data files by path; both are mapped again on
    the other side, in this process and in a spawned one."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (ROWS, COLS))
    w = m.constant(array.array("f", WEIGHTS), "float32", (2, COLS))
    bias = m.constant(array.array("f", BIAS), "float32", (2,))
    m.output(m.relu(m.linear(x, w, bias)), "y")
    data_path = tmp_path / "weights.rtd"
    b.save(tmp_path / "mlp.rtp", external_data=data_path)
    source = str(tmp_path / "mlp.rtp") if by_path else (tmp_path / "mlp.rtp").read_bytes()
    with rt.Program.load(source, data_files=[data_path]) as program:
        data = pickle.dumps(program)
        assert str(data_path).encode() in data
        with pickle.loads(data) as copy:
            assert copy.data_files == (str(data_path),)
            assert run(copy, 3) == run(program, 3)
        module = rt.load(source, data_files=[data_path])
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            assert pool.starmap(_run_program, [(program, 5)]) == [run(program, 5)]
            assert pool.starmap(_run_program, [(module, 5)]) == [run(program, 5)]
        assert run(program, 5) == reference(batch(5))
        module.close()


@pytest.mark.parametrize("dtype,shape,data,match", [
    ("float32", (1 << 28,), b"\0" * 4, "bytes do not hold a float32 tensor of shape"),
    ("float32", (-1, -1), b"\0" * 4, "none negative"),
    ("float32", (1,) * 17, b"\0" * 4, "at most 16 dimensions"),
    ("float32", ("1",), b"\0" * 4, "not a sequence of ints"),
    ("not_a_dtype", (1,), b"\0" * 4, "not_a_dtype"),
    ("float32", (1,), [0, 0, 0, 0], "holds list data"),
])
def test_a_tampered_tensor_pickle_is_refused(dtype, shape, data, match):
    """A Tensor pickle is outside data: one whose shape its bytes do not fill used to be
    accepted, a 1 GiB writable view over 4 bytes."""
    good = pickle.dumps(rt.Tensor.from_bytes(b"\0" * 4, "float32", (1,)))
    assert pickle.loads(good).shape == (1,)
    func, _ = rt.Tensor.from_bytes(b"\0" * 4, "float32", (1,)).__reduce__()
    tampered = pickle.dumps(_Reduce(func, (data, dtype, shape)))
    with pytest.raises(rt.InvalidArgument, match=match):
        pickle.loads(tampered)


class _Reduce:
    """Pickles as func(*args): how a hand-written pickle would call the unpickler."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args
