"""Program format v1: round trip, an independent reading of the spec, and hostile bytes."""
from __future__ import annotations

import os
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import writer as w
from tests.programs import add_program, rich_program


def sections(data: bytes):
    """Section table per docs/format.md, read independently of the writer's helpers."""
    magic, major, minor, hsize, fsize, count, flags, table = struct.unpack_from("<8sHHIQIIQ", data)
    assert magic == b"\x89RTP\r\n\x1a\n" and major == 1 and minor in (0, 1, 2) and hsize == 64
    assert fsize == len(data) and flags == 0
    out = {}
    for i in range(count):
        kind, sflags, offset, size = struct.unpack_from("<IIQQ", data, table + 24 * i)
        out[kind] = (offset, size)
    return out


def test_round_trip_metadata_and_results():
    data, (weight, bias) = rich_program()
    with rt.Program.load(data) as program:
        assert program.method_names == ("forward", "scale")
        meta = program.method_meta("forward")
        assert (meta.num_inputs, meta.num_outputs) == (1, 1)
        x_info = meta.input_tensor_meta(0)
        assert (x_info.name, x_info.dtype, x_info.shape, x_info.dynamic) == ("x", "float32", (8, 3), True)
        assert x_info.is_memory_planned and not x_info.is_constant
        assert meta.output_tensor_meta(0).name == "y"
        assert meta.attribute_meta("calls").shape == (1,)
        scale = program.method_meta("scale")
        assert scale.input_tensor_meta(1).kind == "bool"
        with program.load_method("forward") as forward:
            x = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
            (y,) = forward(x)
            np.testing.assert_allclose(np.asarray(y), np.maximum(x @ weight.T + bias, 0), rtol=1e-6)
            forward(x)
            assert np.asarray(forward.get_attribute("calls")).tolist() == [2]


def test_layout_follows_the_spec():
    data, (weight, bias) = rich_program()
    secs = sections(data)
    assert {1, 2, 4, 5, 6, 7, 8} <= set(secs)
    seg_off, seg_size = secs[w.SEGMENT]
    assert seg_off % 64 == 0
    # Every constant is 64-aligned in the file and holds the bytes given to the builder.
    c_off, _ = secs[w.CONSTANTS]
    count = struct.unpack_from("<I", data, c_off)[0]
    found = []
    for i in range(count):
        off, nbytes, name, flags = struct.unpack_from("<QQII", data, c_off + 8 + 24 * i)
        assert off % 64 == 0 and flags == 0 and off + nbytes <= seg_size
        found.append(data[seg_off + off:seg_off + off + nbytes])
    assert weight.tobytes() in found and bias.tobytes() in found
    # Checksums as the spec defines them.
    meta = zlib.crc32(data[:40])
    meta = zlib.crc32(data[64:seg_off], meta)
    meta = zlib.crc32(data[seg_off + seg_size:], meta)
    assert struct.unpack_from("<II", data, 40) == (meta, zlib.crc32(data[seg_off:seg_off + seg_size]))


def test_file_load_maps_weights_without_copying(tmp_path):
    """A program with 256 MB of weights loads without reading them: RSS barely moves."""
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc to read RSS")
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    big = m.constant(bytes(256 << 20), "uint8", (256 << 20,), name="big")
    x = m.input("x", "uint8", (4,))
    m.output(m.add(x, x))
    m.output(big, "weights")  # used, so the builder keeps it; outputs are views: never read
    path = tmp_path / "big.rtp"
    path.write_bytes(b.to_bytes())
    del b, m, big

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = rss()
    with rt.Program.load(str(path)) as program:
        after = rss()
        assert program.constant_bytes >= 256 << 20
        with program.load_method("forward", clone_outputs=False) as forward:
            y, weights = forward(bytearray([1, 2, 3, 4]))
            assert y.tolist() == [2, 4, 6, 8] and weights.nbytes == 256 << 20
    assert after - before < 32 << 20, f"load grew RSS by {(after - before) >> 20} MB"


def test_verify_constants_detects_corrupted_weights():
    data = bytearray(rich_program()[0])
    seg_off, seg_size = sections(bytes(data))[w.SEGMENT]
    data[seg_off + 5] ^= 0x40
    rt.Program.load(bytes(data)).close()  # weights are not read by default
    with pytest.raises(rt.InvalidProgram, match="constant segment checksum"):
        rt.Program.load(bytes(data), verify_constants=True)


def test_borrowed_buffer_must_be_aligned():
    data = add_program()
    raw = bytearray(len(data) + 64)
    from runtime_py._ffi import ffi

    start = (-int(ffi.cast("uintptr_t", ffi.from_buffer(raw)))) % 64 + 1  # misaligned by 1
    raw[start:start + len(data)] = data
    view = memoryview(raw)[start:start + len(data)]
    with pytest.raises(rt.InvalidArgument, match="aligned"):
        rt.Program.load(view, copy=False)
    with rt.Program.load(view) as program:  # copied by default
        assert program.method_names == ("forward",)


@pytest.mark.parametrize("text,match", [
    (b"", "shorter than its 64-byte header"),
    (b"\0" * 64, "bad magic"),
    (b"\x89RTP\r\n\x1a\n" + struct.pack("<HH", 2, 0) + b"\0" * 52, "version 2.0"),
])
def test_header_errors(text, match):
    with pytest.raises(rt.InvalidProgram, match=match):
        rt.Program.load(text)


def test_every_truncation_is_rejected_with_an_offset():
    data = add_program()
    for n in range(len(data)):
        with pytest.raises(rt.InvalidProgram) as info:
            rt.Program.load(data[:n])
        assert "byte offset" in str(info.value)


def test_truncated_file_names_path(tmp_path):
    path = tmp_path / "cut.rtp"
    path.write_bytes(add_program()[:100])
    with pytest.raises(rt.InvalidProgram, match="cut.rtp.*truncated"):
        rt.Program.load(str(path))


def test_unknown_op_fails_method_load_naming_it():
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2,))
    m.output(m.call("frobnicate", x, outputs=[("float32", (2,), False)])[0])
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(rt.NotFound, match="frobnicate"):
            program.load_method("forward")
        assert program.method_names == ("forward",)  # the program stays usable


def load_and_run_everything(data: bytes) -> None:
    """Load mutated bytes; whatever loads must also prepare and run cleanly or raise Error."""
    try:
        program = rt.Program.load(data)
    except rt.InvalidProgram as e:
        assert str(e)
        return
    except rt.NotFound as e:  # a flipped flag can mark a constant as kept in a data file
        assert "data file" in str(e)
        return
    with program:
        for name in program.method_names:
            try:
                meta = program.method_meta(name)
                with program.load_method(name, memory_limit=1 << 28, max_steps=10000) as method:
                    inputs = []
                    for info in meta.inputs:
                        if info.kind == "tensor":
                            inputs.append(bytearray(info.nbytes))
                        else:
                            inputs.append(0 if info.kind != "bool" else False)
                    method(*inputs)
            except rt.Error as e:
                assert str(e)


mutation_settings = settings(max_examples=300, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


@mutation_settings
@given(st.data())
def test_bit_flips_with_fixed_checksums_never_crash(data):
    raw = bytearray(rich_program()[0])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    w.fix_checksums(raw)
    load_and_run_everything(bytes(raw))


@mutation_settings
@given(st.data())
def test_grown_fields_never_crash(data):
    """Overwrite an aligned 4- or 8-byte field with an extreme value (counts, offsets, sizes,
    indices), fix the checksums so the verifier's deeper checks are reached."""
    raw = bytearray(rich_program()[0])
    width = data.draw(st.sampled_from([4, 8]))
    pos = data.draw(st.integers(0, (len(raw) - width) // width)) * width
    value = data.draw(st.sampled_from([0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                       2**63 - 1, 2**64 - 1, 2**62, 4096]))
    raw[pos:pos + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    if pos >= 48:
        w.fix_checksums(raw)
    load_and_run_everything(bytes(raw))


@mutation_settings
@given(st.data())
def test_splices_never_crash(data):
    a = rich_program(1)[0]
    b = add_program((3, 2))
    cut_a = data.draw(st.integers(0, len(a)))
    cut_b = data.draw(st.integers(0, len(b)))
    raw = bytearray(a[:cut_a] + b[cut_b:])
    if len(raw) >= 64:
        struct.pack_into("<Q", raw, 16, len(raw))
        try:
            w.fix_checksums(raw)
        except struct.error:
            pass
    load_and_run_everything(bytes(raw))


# ---- version 1.1: EXTERNAL constants ----------------------------------------------------------

def external_program(tmp_path):
    """(program bytes with two EXTERNAL constants, data file path)."""
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2,))
    m.output(m.add(m.mul(x, m.constant(np.array([2.0, 3.0], np.float32), key="scale")),
                   m.constant(np.array([0.5, -1.0], np.float32), key="shift")), "y")
    path = tmp_path / "w.rtd"
    return b.to_bytes(external_data=path), path


def test_external_constants_follow_the_spec(tmp_path):
    data, path = external_program(tmp_path)
    assert struct.unpack_from("<HH", data, 8) == (1, 1)
    table = {}
    count, table_at = struct.unpack_from("<I", data, 24)[0], struct.unpack_from("<Q", data, 32)[0]
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", data, table_at + 24 * i)
        table[kind] = (offset, size)
    c_off, _ = table[w.CONSTANTS]
    n = struct.unpack_from("<I", data, c_off)[0]
    records = [struct.unpack_from("<QQII", data, c_off + 8 + 24 * i) for i in range(n)]
    assert [(off, nbytes, flags) for off, nbytes, _, flags in records] == [(0, 8, 1), (0, 8, 1)]
    with rt.Program.load(data, data_files=[path]) as program, program.load_method() as f:
        assert f(np.array([1.0, 1.0], np.float32))[0].tolist() == [2.5, 2.0]


@pytest.mark.parametrize("field,value,match", [
    (0, 64, "external constant 0 has a segment offset"),
    (16, 0xFFFFFFFF, "external constant 0 names key string"),
    (20, 3, "constant 0 has unknown flags 0x3"),
    (20, 2, "constant 0 has unknown flags 0x2"),
])
def test_hostile_external_constant_records(tmp_path, field, value, match):
    data, path = external_program(tmp_path)
    count, table_at = struct.unpack_from("<I", data, 24)[0], struct.unpack_from("<Q", data, 32)[0]
    c_off = next(struct.unpack_from("<IIQQ", data, table_at + 24 * i)[2] for i in range(count)
                 if struct.unpack_from("<I", data, table_at + 24 * i)[0] == w.CONSTANTS)
    raw = bytearray(data)
    width = 8 if field in (0, 8) else 4
    raw[c_off + 8 + field:c_off + 8 + field + width] = value.to_bytes(width, "little")
    w.fix_checksums(raw)
    with pytest.raises(rt.InvalidProgram, match=match) as info:
        rt.Program.load(bytes(raw), data_files=[path])
    assert f"byte offset {c_off + 8}" in str(info.value)


@mutation_settings
@given(st.data())
def test_mutated_external_programs_never_crash(tmp_path_factory, data):
    """Bit flips in a program with EXTERNAL constants, loaded with its data file."""
    tmp = tmp_path_factory.mktemp("ext")
    program, path = external_program(tmp)
    raw = bytearray(program)
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(64, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    w.fix_checksums(raw)
    try:
        p = rt.Program.load(bytes(raw), data_files=[path])
    except rt.Error as exc:
        assert str(exc)
        return
    with p:
        for name in p.method_names:
            try:
                with p.load_method(name, memory_limit=1 << 26, max_steps=10000) as m:
                    m(np.zeros(2, np.float32))
            except rt.Error as exc:
                assert str(exc)


def _dynamic_axes_program(axes):
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4, 3, 8), max_shape=(4, 3, 8), dynamic_axes=axes)
    m.output(m.relu(x))
    return b.to_bytes()


def test_dynamic_axes_follow_the_spec():
    """Format 1.2: flag AXES (2) on a dynamic tensor, its mask of varying axes in the record's
    reserved word; read back through rt_program_input_dynamic_axes; set_input holds the other
    axes to their size."""
    data = bytearray(_dynamic_axes_program([0, -1]))
    assert struct.unpack_from("<HH", data, 8) == (1, 2)
    offset, size = _values_section(data)
    records = [struct.unpack_from("<BBBBBBHIIIIq", data, offset + i) for i in range(0, size, 32)]
    (x,) = [r for r in records if r[0] == w.TENSOR and r[1] & w.FLAG_AXES]
    assert x[1] == w.FLAG_DYNAMIC | w.FLAG_AXES and x[10] == 0b101
    program = rt.Program.load(bytes(data))
    assert program.method_meta("forward").inputs[0].dynamic_axes == (0, 2)
    with program.load_method("forward") as method:
        x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(method(x)[0]), np.maximum(x, 0))
        with pytest.raises(rt.InvalidArgument, match=r"axis 1 of size 3 exactly"):
            method(np.zeros((2, 2, 5), np.float32))
    # Without the flag (files before 1.2) every axis of a dynamic tensor varies.
    old = rt.Program.load(_dynamic_axes_program(None))
    assert old.method_meta("forward").inputs[0].dynamic_axes == (0, 1, 2)


@pytest.mark.parametrize("flags, mask, match", [
    (w.FLAG_AXES, 0b1, "need a dynamic tensor"),
    (w.FLAG_DYNAMIC | w.FLAG_AXES, 0b1000, "need a dynamic tensor with those axes"),
    (w.FLAG_DYNAMIC | 4, 0, "unknown flags 0x5"),
])
def test_hostile_dynamic_axes_are_refused_by_offset(flags, mask, match):
    data = bytearray(_dynamic_axes_program([0]))
    offset, size = _values_section(data)
    for i in range(offset, offset + size, 32):
        if data[i] == w.TENSOR and data[i + 1] & w.FLAG_AXES:
            data[i + 1] = flags
            struct.pack_into("<I", data, i + 20, mask)
            break
    w.fix_checksums(data)
    with pytest.raises(rt.InvalidProgram, match=match):
        rt.Program.load(bytes(data))


def _values_section(data):
    count, table = struct.unpack_from("<I", data, 24)[0], struct.unpack_from("<Q", data, 32)[0]
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", data, table + 24 * i)
        if kind == w.VALUES:
            return offset, size
    raise AssertionError("no VALUES section")
