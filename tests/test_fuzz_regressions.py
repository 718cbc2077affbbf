"""Every input that once crashed the fuzzer (tests/fuzz/regressions/, see
docs/reliability.md) goes through the Python API the way the harness drives the C API: load,
load every method with a memory and step limit, bind zeros of each input's declared shape and
dtype, execute twice, read the outputs. Each must end cleanly: it runs, or raises
runtime_py.Error."""
from __future__ import annotations

from pathlib import Path

import pytest

import runtime_py as rt
from runtime_py._ffi import ffi
from tests.fuzz.seeds import seed_data_files, seed_programs

REGRESSIONS = Path(__file__).resolve().parent / "fuzz" / "regressions"
FILES = sorted(p for p in REGRESSIONS.glob("*.rtp"))
MEMORY_LIMIT = 64 << 20
MAX_STEPS = 25000  # as tests/fuzz/fuzz_program.c


def zeros_for(info: rt.TensorInfo):
    if info.kind == "tensor":
        # The raw-pointer form with the declared dtype and shape: Python knows no bfloat16 and
        # a bytearray would be read as the shape only when static.
        buf = bytearray(max(info.nbytes, 1))
        return buf, (ffi.from_buffer(buf), info.dtype, info.shape, None)
    return None, False if info.kind == "bool" else 0.0 if info.kind == "double" else 0


def run_everything(data: bytes) -> str:
    """'ran', or the name of the error that ended it."""
    try:
        program = rt.Program.load(data)
    except rt.Error as exc:
        assert str(exc)
        return type(exc).__name__
    outcome = "ran"
    with program:
        for name in program.method_names:
            try:
                meta = program.method_meta(name)
                with program.load_method(name, memory_limit=MEMORY_LIMIT,
                                         max_steps=MAX_STEPS) as method:
                    pairs = [zeros_for(i) for i in meta.inputs]  # (buffer kept alive, arg)
                    for _ in range(2):
                        method(*[arg for _, arg in pairs]) if pairs else method()
            except rt.Error as exc:
                assert str(exc)
                outcome = type(exc).__name__
    return outcome


# How each input must end, where that is known: the bug it once triggered is now refused.
EXPECTED = {
    # Sizes [.., 0, ..] beside a size whose product with the rest overflows int64 strides.
    "zero-dim-stride-overflow.rtp": "InvalidProgram",
    # Loops of conv2d that ran past the fuzzer's timeout: max_steps stops them.
    "timeout-conv-loop-max-steps-1.rtp": "InvalidState",
    "timeout-conv-loop-max-steps-2.rtp": "InvalidState",
}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_regression_input_ends_cleanly(path):
    outcome = run_everything(path.read_bytes())
    assert outcome == EXPECTED.get(path.name, outcome)


@pytest.mark.parametrize("name", sorted(seed_programs()))
def test_seed_programs_run(name):
    """The fuzzer's seeds are valid programs: each runs to the end."""
    assert run_everything(seed_programs()[name]) == "ran"


def test_seed_data_files_are_valid(tmp_path):
    """The data file seed holds what the external-constant seed needs; alone, that program
    fails cleanly naming its key, as the harness sees it."""
    seeds = seed_data_files()
    assert run_everything(seeds["external.rtp"]) == "NotFound"
    (tmp_path / "weights.rtd").write_bytes(seeds["weights.rtd"])
    with rt.Program.load(seeds["external.rtp"], data_files=[tmp_path / "weights.rtd"],
                         verify_constants=True) as program:
        with program.load_method() as forward:
            y, table = forward(bytearray(32))
            assert table.tolist() == [[[0, 1, 2], [3, 4, 5]]]


def test_bundled_seed_cases_pass():
    with rt.Program.load(seed_programs()["bundled"]) as program:
        for name in program.method_names:
            with program.load_method(name) as method:
                for case in program.bundled_tests(name):
                    method.verify_bundled(case.index, rtol=1e-5, atol=1e-6)
