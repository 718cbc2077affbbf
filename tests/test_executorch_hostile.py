"""Malformed and unsupported .pte files: every one gives a clean runtime_py error (MalformedPte
naming the byte offset and the table/field, or ConversionError naming the method, the
instruction and the operator), never another exception or a crash. No numpy needed.
"""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
import runtime_py as rt
from runtime_py import executorch as et
from runtime_py.executorch import _program

pytestmark = pytest.mark.core

DATA = Path(__file__).parent / "data" / "executorch"
ADD = (DATA / "add.pte").read_bytes()
SMALL = {name: (DATA / f"{name}.pte").read_bytes() for name in ("counter", "two_methods")}


def _first_instruction(data: bytes):
    """The FlatBuffer table of the first instruction of the first plan (for crafting files)."""
    from runtime_py.executorch._flatbuffer import Buffer

    root = Buffer(data).root("Program")
    plan = root.tables(1, "execution_plan")[0]
    chain = plan.tables(5, "chains")[0]
    return chain.tables(2, "instructions")[0]


def _patched(data: bytes, pos: int, raw: bytes) -> bytes:
    b = bytearray(data)
    b[pos:pos + len(raw)] = raw
    return bytes(b)


def test_every_truncation_of_a_small_program_is_refused_cleanly():
    whole = et.convert(ADD)
    refused = 0
    for n in range(len(ADD)):
        try:
            converted = et.convert(ADD[:n])
        except rt.Error as e:
            assert "byte offset" in str(e) or "value" in str(e), (n, str(e))
            refused += 1
        else:  # only trailing padding, which nothing references, may be cut
            assert converted == whole, n
    assert refused >= len(ADD) - 8


def test_truncated_constant_segment_names_the_offset():
    data = (DATA / "cnn.pte").read_bytes()
    with pytest.raises(et.MalformedPte, match=r"byte offset \d+: Program.segments\[0\] spans "
                                              r"bytes 5248..27192, past the end of the file"):
        et.convert(data[:len(data) - 100])
    # A constant whose offset runs past its segment: named by value and instruction.
    from runtime_py.executorch._flatbuffer import Buffer

    offsets = Buffer(data).root("Program").table(5, "constant_segment")
    pos = offsets._field(1, "offsets", 4)
    last = pos + struct.unpack_from("<I", data, pos)[0] + 4 + 8 * 1
    with pytest.raises(et.MalformedPte, match=r"byte offset \d+: method 'forward': instruction 0 "
                                              r"\(aten::convolution.out\): constant value \d+ "
                                              r"needs \d+ bytes of data"):
        et.convert(_patched(data, last, struct.pack("<Q", 21900)))


def test_not_a_pte():
    with pytest.raises(et.MalformedPte, match="byte offset 4: not an ExecuTorch program"):
        et.convert(b"\x00" * 64)
    assert not et.is_pte(b"\x89RTP\r\n\x1a\n")


def test_root_offset_past_the_end():
    with pytest.raises(et.MalformedPte, match=r"byte offset 4000000000: table Program"):
        et.convert(_patched(ADD, 0, struct.pack("<I", 4_000_000_000)))


def test_vector_length_past_the_end_names_the_field():
    data = SMALL["two_methods"]
    from runtime_py.executorch._flatbuffer import Buffer

    root = Buffer(data).root("Program")
    pos = root._field(1, "execution_plan", 4)
    vector = pos + struct.unpack_from("<I", data, pos)[0]
    with pytest.raises(et.MalformedPte, match=rf"byte offset {vector}: "
                                              r"Program.execution_plan claims 1000000 items"):
        et.convert(_patched(data, vector, struct.pack("<I", 1_000_000)))


def test_segment_past_the_end():
    data = (DATA / "mlp.pte").read_bytes()
    from runtime_py.executorch._flatbuffer import Buffer

    segment = Buffer(data).root("Program").tables(4, "segments")[0]
    pos = segment._field(1, "size", 8)
    with pytest.raises(et.MalformedPte, match=r"Program.segments\[0\] spans bytes"):
        et.convert(_patched(data, pos, struct.pack("<Q", 1 << 40)))


def test_unknown_operator_is_named_with_its_instruction():
    data = ADD.replace(b"aten::add", b"aten::xyz")
    with pytest.raises(et.ConversionError, match=r"method 'forward': instruction 0 "
                                                 r"\(aten::xyz\.out\): this operator is not "
                                                 r"supported"):
        et.convert(data)


def test_real_xnnpack_delegate_is_refused_by_name():
    with pytest.raises(et.ConversionError, match=r"instruction 0 \(DelegateCall\): calls backend "
                                                 r"delegate 'XnnpackBackend'"):
        et.convert(DATA / "delegated.pte")
    with pytest.raises(rt.Unsupported):  # through runtime_py.load as well
        rt.load(DATA / "delegated.pte")


def test_instruction_kinds_we_cannot_run_are_named():
    ins = _first_instruction(ADD)
    kind_pos = ins._field(0, "instr_args_type", 1)
    # DelegateCall has KernelCall's layout: the same table read as a call of delegate 0.
    with pytest.raises(et.ConversionError, match=r"instruction 0 \(DelegateCall\)"):
        et.convert(_patched(ADD, kind_pos, bytes([_program.I_DELEGATE])))
    with pytest.raises(et.ConversionError, match=r"instruction 0 \(JumpFalseCall\)"):
        et.convert(_patched(ADD, kind_pos, bytes([_program.I_JUMP_FALSE])))
    with pytest.raises(et.MalformedPte, match=r"instruction 0 has no arguments or an unknown "
                                              r"kind 9"):
        et.convert(_patched(ADD, kind_pos, bytes([9])))


def test_unsupported_dtype_is_named():
    from runtime_py.executorch._flatbuffer import Buffer

    plan = Buffer(ADD).root("Program").tables(1, "execution_plan")[0]
    tensor = plan.tables(2, "values")[0].table(1, "val")
    pos = tensor._field(0, "scalar_type", 1)
    with pytest.raises(et.ConversionError, match="value 0: tensor dtype QINT8 is not supported"):
        et.convert(_patched(ADD, pos, bytes([12])))


def test_value_index_out_of_range_is_named():
    ins = _first_instruction(ADD)
    call = ins.table(1, "instr_args")
    args = call._field(1, "args", 4)
    first = args + struct.unpack_from("<I", ADD, args)[0] + 4
    with pytest.raises(et.MalformedPte, match=r"instruction 0: value index 999 is out of range"):
        et.convert(_patched(ADD, first, struct.pack("<i", 999)))


def test_failed_conversion_leaves_nothing_half_built():
    with pytest.raises(rt.Error):
        et.convert(ADD[:100])
    assert et.convert(ADD)  # the importer keeps no state between calls


def test_scalar_beyond_float32_range_becomes_infinity():
    """A Double argument too large for the tensor's dtype converts as C does (to inf) instead
    of failing inside struct (found by fuzzing)."""
    data = (DATA / "attn.pte").read_bytes()
    from runtime_py.executorch._flatbuffer import Buffer

    plan = Buffer(data).root("Program").tables(1, "execution_plan")[0]
    for value in plan.tables(2, "values"):
        if value.scalar(0, "val_type", "u8") == _program.K_DOUBLE:
            pos = value.table(1, "val")._field(0, "double_val", 8)
            if abs(struct.unpack_from("<d", data, pos)[0] - 0.4204482) < 1e-6:
                break
    else:
        pytest.fail("attn.pte has no mul.Scalar_out scale")
    program = et.convert(_patched(data, pos, struct.pack("<d", 1e300)))
    with rt.Program.load(program) as loaded:
        assert loaded.method_names == ("forward",)


def test_names_with_nul_bytes():
    """A NUL in a plan name is refused; one in a buffer name falls back to buffer_N."""
    data = SMALL["counter"]
    with pytest.raises(et.MalformedPte, match="has no name, or a NUL in it"):
        et.convert(data.replace(b"forward", b"forw\0rd"))
    with rt.Program.load(et.convert(data.replace(b"total", b"to\0al"))) as program:
        names = {info.name for info in program.method_meta("forward").attributes}
        assert "count" in names and any(n.startswith("buffer_") for n in names)


@pytest.mark.parametrize("name, message", [
    ("pool_indices", r"instruction 0 \(aten::max_pool2d_with_indices\.out\): the indices output "
                     r"of max_pool2d_with_indices is read"),
    ("divisor_override", r"instruction 0 \(aten::avg_pool2d\.out\): divisor_override"),
])
def test_unsupported_arguments_are_named(name, message):
    with pytest.raises(et.ConversionError, match=r"method 'forward': " + message):
        et.convert(DATA / f"refused_{name}.pte")


def test_advanced_indexing_with_two_index_tensors():
    """x[i0, i1] (aten::index.Tensor with two index tensors): broadcast, stacked, gather_nd;
    negative indices count from the end, and one out of range is refused naming it."""
    np = pytest.importorskip("numpy")  # this file runs without numpy too (the core subset)
    program = et.convert(DATA / "index_two_tensors.pte")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with rt.Program.load(program) as p, p.load_method("forward") as method:
        for i0, i1 in (([0, 2], [1, 3]), ([2, -3], [-1, 0])):
            i0, i1 = np.array(i0, np.int64), np.array(i1, np.int64)
            np.testing.assert_array_equal(np.asarray(method(x, i0, i1)[0]), x[i0, i1])
        with pytest.raises(rt.InvalidArgument, match="out of range"):
            method(x, np.array([0, 3], np.int64), np.array([1, 3], np.int64))


def test_advanced_indexing_with_index_tensors_apart():
    """x[i0, :, i2]: with a slice between the index tensors, numpy and torch put the broadcast
    dimensions first and the sliced ones after them."""
    np = pytest.importorskip("numpy")
    program = et.convert(DATA / "index_tensors_apart.pte")
    x = np.arange(120, dtype=np.float32).reshape(3, 2, 4, 5)
    with rt.Program.load(program) as p, p.load_method("forward") as method:
        for i0, i2 in (([[0], [2]], [1, 3, 0]), ([[-1], [1]], [-4, 2, 3])):
            i0, i2 = np.array(i0, np.int64), np.array(i2, np.int64)
            got = np.asarray(method(x, i0, i2)[0])
            assert got.shape == (2, 3, 2, 5)
            np.testing.assert_array_equal(got, x[i0, :, i2])
