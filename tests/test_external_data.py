"""Weights in a separate data file (.rtd, docs/format.md "Data files"): written by the builder
and the ONNX importer, shared by programs, mapped in place, and verified as rigorously as
programs (missing keys, mismatched dtypes and shapes, hostile bytes)."""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.compiler.datafile import DataEntry, encode_data_file, read_data_file

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(11)
W1 = RNG.standard_normal((6, 4)).astype(np.float32)
B1 = RNG.standard_normal(6).astype(np.float32)
W2 = RNG.standard_normal((3, 6)).astype(np.float32)


def mlp(variant: str = "relu") -> ProgramBuilder:
    """forward(x (2, 4)) = act(x @ W1.T + B1) @ W2.T; the variants differ in graph only."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 4))
    h = m.linear(x, m.constant(W1), m.constant(B1))
    h = m.relu(h) if variant == "relu" else m.softmax(h, axis=-1)
    m.output(m.linear(h, m.constant(W2)), "y")
    return b


def reference(x: np.ndarray, variant: str = "relu") -> np.ndarray:
    h = x.astype(np.float64) @ W1.T + B1
    if variant == "relu":
        h = np.maximum(h, 0)
    else:
        e = np.exp(h - h.max(axis=-1, keepdims=True))
        h = e / e.sum(axis=-1, keepdims=True)
    return h @ W2.T


X = RNG.standard_normal((2, 4)).astype(np.float32)


def run(program: rt.Program) -> np.ndarray:
    with program.load_method() as forward:
        return np.asarray(forward(X)[0])


@pytest.fixture
def saved(tmp_path):
    mlp().save(tmp_path / "mlp.rtp", external_data=tmp_path / "weights.rtd")
    return tmp_path / "mlp.rtp", tmp_path / "weights.rtd"


# ---- round trip and the file's layout -------------------------------------------------------

def test_weights_leave_the_program(saved, tmp_path):
    program_path, data_path = saved
    data = program_path.read_bytes()
    assert W1.tobytes() in mlp().to_bytes()
    assert W1.tobytes() not in data and W2.tobytes() not in data  # the weights went elsewhere
    assert struct.unpack_from("<HH", data, 8) == (1, 1)
    with rt.Program.load(str(program_path), data_files=[str(data_path)]) as program:
        assert program.constant_bytes == 0
        assert program.data_files == (str(data_path),)
        np.testing.assert_allclose(run(program), reference(X), rtol=1e-5, atol=1e-6)
    with rt.Program.load(data, data_files=str(data_path)) as program:  # a buffer, one path
        np.testing.assert_allclose(run(program), reference(X), rtol=1e-5, atol=1e-6)
    module = rt.load(str(program_path), data_files=[data_path])
    np.testing.assert_allclose(np.asarray(module.forward(X)[0]), reference(X), rtol=1e-5,
                               atol=1e-6)
    module.close()


def test_data_file_layout_follows_the_spec(saved):
    """Read the data file from the spec alone: header, entries, keys, shapes, alignment,
    checksums."""
    _, data_path = saved
    raw = data_path.read_bytes()
    (magic, major, minor, hsize, fsize, count, flags, table, table_size, data_at, meta_crc,
     data_crc) = struct.unpack_from("<8sHHIQIIQQQII", raw)
    assert (magic, major, minor, hsize, fsize, flags) == (b"\x89RTD\r\n\x1a\n", 1, 0, 64,
                                                          len(raw), 0)
    assert table % 8 == 0 and data_at % 64 == 0 and table + table_size <= data_at
    assert meta_crc == zlib.crc32(raw[table:table + table_size], zlib.crc32(raw[:56]))
    assert data_crc == zlib.crc32(raw[data_at:])
    found = {}
    for i in range(count):
        off, nbytes, key, key_len, code, bits, lanes, rank, shape, reserved = \
            struct.unpack_from("<QQIIBBHIII", raw, table + 40 * i)
        assert off % 64 == 0 and reserved == 0 and lanes == 1 and (code, bits) == (2, 32)
        name = raw[table + key:table + key + key_len].decode()
        assert raw[table + key + key_len] == 0
        dims = struct.unpack_from(f"<{rank}q", raw, table + shape)
        found[name] = (dims, raw[data_at + off:data_at + off + nbytes])
    assert sorted(found.values()) == sorted([(W1.shape, W1.tobytes()), (B1.shape, B1.tobytes()),
                                             (W2.shape, W2.tobytes())])
    import hashlib

    for array in (W1, B1, W2):  # the key is the digest the spec defines
        text = "float32[" + ", ".join(str(d) for d in array.shape) + "]"
        key = "sha256-" + hashlib.sha256(text.encode() + array.tobytes()).hexdigest()
        assert found[key] == (array.shape, array.tobytes())


def test_explicit_keys(tmp_path):
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4,))
    m.output(m.add(x, m.constant(np.arange(4, dtype=np.float32), key="layer0.bias")), "y")
    b.save(tmp_path / "p.rtp", external_data=tmp_path / "d.rtd")
    entries = read_data_file(tmp_path / "d.rtd")
    assert list(entries) == ["layer0.bias"]
    assert entries["layer0.bias"] == DataEntry("float32", (4,), np.arange(4, dtype=np.float32)
                                               .tobytes())
    with rt.Program.load(str(tmp_path / "p.rtp"), data_files=[tmp_path / "d.rtd"]) as p, \
            p.load_method() as f:
        assert f(np.ones(4, np.float32))[0].tolist() == [1, 2, 3, 4]
    # Another program that means other bytes by the same key cannot share the file.
    other = ProgramBuilder()
    om = other.method("forward")
    om.output(om.add(om.input("x", "float32", (4,)),
                     om.constant(np.zeros(4, np.float32), key="layer0.bias")))
    with pytest.raises(ValueError, match="already holds key 'layer0.bias'"):
        other.to_bytes(external_data=tmp_path / "d.rtd")


def test_two_programs_share_one_data_file(tmp_path):
    data_path = tmp_path / "shared.rtd"
    mlp("relu").save(tmp_path / "a.rtp", external_data=data_path)
    first = data_path.read_bytes()
    mlp("softmax").save(tmp_path / "b.rtp", external_data=data_path)
    assert data_path.read_bytes() == first  # same weights: nothing to add
    for name, variant in (("a.rtp", "relu"), ("b.rtp", "softmax")):
        with rt.Program.load(str(tmp_path / name), data_files=[data_path]) as program:
            np.testing.assert_allclose(run(program), reference(X, variant), rtol=1e-5,
                                       atol=1e-6)
    # A third program with one more weight adds only that entry.
    b = mlp("relu")
    extra = np.full((3,), 0.5, np.float32)
    (m,) = b._methods
    y = m._outputs[0][0]
    m._outputs.clear()
    m.output(m.add(y, m.constant(extra)), "y")
    b.save(tmp_path / "c.rtp", external_data=data_path)
    entries = read_data_file(data_path)
    assert len(entries) == 4
    with rt.Program.load(str(tmp_path / "c.rtp"), data_files=[data_path]) as program:
        np.testing.assert_allclose(run(program), reference(X) + 0.5, rtol=1e-5, atol=1e-6)


# ---- what loading refuses -------------------------------------------------------------------

def test_missing_data_file_or_key_is_named(saved, tmp_path):
    program_path, data_path = saved
    with pytest.raises(rt.NotFound, match=r"constant 0 \('sha256-[0-9a-f]{64}'\) lives in a "
                                          r"data file, but none was given"):
        rt.Program.load(str(program_path))
    empty = tmp_path / "empty.rtd"
    empty.write_bytes(encode_data_file({}))
    with pytest.raises(rt.NotFound, match=r"constant \d+ \('sha256-[0-9a-f]{64}'\) is in none "
                                          r"of the data files \('.*empty.rtd'\)"):
        rt.Program.load(str(program_path), data_files=[empty])
    with pytest.raises(rt.RuntimeIOError, match="cannot open data file '.*nope.rtd'"):
        rt.Program.load(str(program_path), data_files=[tmp_path / "nope.rtd"])
    copy = tmp_path / "copy.rtd"
    copy.write_bytes(data_path.read_bytes())
    with pytest.raises(rt.InvalidArgument, match="is in two data files"):
        rt.Program.load(str(program_path), data_files=[data_path, copy])


def key_of(array: np.ndarray) -> str:
    return ProgramBuilder.constant_key(array.tobytes(), str(array.dtype), array.shape)


def test_dtype_and_shape_mismatch_are_named(saved, tmp_path):
    program_path, data_path = saved
    entries = read_data_file(data_path)
    key = key_of(W1)
    as_int = dict(entries)
    as_int[key] = DataEntry("int32", W1.shape, W1.tobytes())
    (tmp_path / "int.rtd").write_bytes(encode_data_file(as_int))
    with pytest.raises(rt.InvalidArgument, match=rf"constant '{key}': method 'forward' value "
                                                 rf"\d+ reads it as float32\[6, 4\], but data "
                                                 rf"file '.*int.rtd' holds int32\[6, 4\]"):
        rt.Program.load(str(program_path), data_files=[tmp_path / "int.rtd"])
    transposed = dict(entries)
    transposed[key] = DataEntry("float32", (4, 6), W1.T.copy().tobytes())
    (tmp_path / "t.rtd").write_bytes(encode_data_file(transposed))
    with pytest.raises(rt.InvalidArgument, match=r"reads it as float32\[6, 4\], but .* holds "
                                                 r"float32\[4, 6\]"):
        rt.Program.load(str(program_path), data_files=[tmp_path / "t.rtd"])
    short = dict(entries)
    short[key] = DataEntry("float32", (6, 3), W1[:, :3].copy().tobytes())
    (tmp_path / "s.rtd").write_bytes(encode_data_file(short))
    with pytest.raises(rt.InvalidArgument, match=rf"constant '{key}': the program expects 96 "
                                                 rf"bytes, but data file '.*s.rtd' holds 72"):
        rt.Program.load(str(program_path), data_files=[tmp_path / "s.rtd"])


# ---- hostile data files ---------------------------------------------------------------------

def fix_data_checksums(raw: bytearray) -> None:
    """Recompute both checksums (as the spec defines them) after an edit, where the table
    fields still allow it."""
    table, table_size, data_at = struct.unpack_from("<QQQ", raw, 32)
    end = min(table + table_size, len(raw))
    crc = zlib.crc32(bytes(raw[table:end]), zlib.crc32(bytes(raw[:56])))
    struct.pack_into("<II", raw, 56, crc, zlib.crc32(bytes(raw[min(data_at, len(raw)):])))


def load_with(program_path: Path, tmp_path: Path, raw: bytes, **kw) -> None:
    bad = tmp_path / "bad.rtd"
    bad.write_bytes(raw)
    rt.Program.load(str(program_path), data_files=[bad], **kw).close()


ENTRY0 = 64  # the first entry record: the writer puts the table right after the header


@pytest.mark.parametrize("offset,fmt,value,match", [
    (0, "<B", 0x88, "at byte offset 0: bad magic bytes"),
    (8, "<H", 2, "at byte offset 8: data file version 2.0"),
    (12, "<I", 60, "at byte offset 12: header size 60"),
    (24, "<I", 99, "at byte offset 32: key table .* 99 entries"),
    (28, "<I", 1, "at byte offset 28: unknown header flags"),
    (32, "<Q", 60, "at byte offset 32: key table"),
    (40, "<Q", 1 << 40, "at byte offset 32: key table"),
    (48, "<Q", 65, "at byte offset 48: data segment offset 65"),
    (ENTRY0 + 0, "<Q", 8, f"at byte offset {ENTRY0}: entry '.*' .* is misaligned"),
    (ENTRY0 + 8, "<Q", 4, "holds 4 bytes, but its dtype and shape make"),
    (ENTRY0 + 16, "<I", 1 << 30, "key .* runs past the table"),
    (ENTRY0 + 20, "<I", 0, "key .* is empty"),
    (ENTRY0 + 20, "<I", 3, "key is not NUL-terminated"),
    (ENTRY0 + 24, "<B", 9, "unknown dtype"),
    (ENTRY0 + 28, "<I", 17, "shape .*rank 17"),
    (ENTRY0 + 32, "<I", 4, "shape .* is misaligned"),
    (ENTRY0 + 36, "<I", 1, "nonzero reserved field"),
])
def test_corrupted_fields_are_rejected_naming_file_and_offset(saved, tmp_path, offset, fmt,
                                                             value, match):
    program_path, data_path = saved
    raw = bytearray(data_path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    fix_data_checksums(raw)
    with pytest.raises(rt.InvalidProgram, match=f"data file '.*bad.rtd': invalid data file "
                                                f"{'' if 'offset' in match else '.*'}{match}"):
        load_with(program_path, tmp_path, bytes(raw))


def test_negative_size_and_duplicate_keys(saved, tmp_path):
    program_path, data_path = saved
    raw = bytearray(data_path.read_bytes())
    shape_at = 64 + struct.unpack_from("<I", raw, ENTRY0 + 32)[0]
    struct.pack_into("<q", raw, shape_at, -1)
    fix_data_checksums(raw)
    with pytest.raises(rt.InvalidProgram, match="size -1 of dimension 0 is negative"):
        load_with(program_path, tmp_path, bytes(raw))
    raw = bytearray(data_path.read_bytes())
    # Point entry 1's key at entry 0's key.
    struct.pack_into("<II", raw, ENTRY0 + 40 + 16, *struct.unpack_from("<II", raw, ENTRY0 + 16))
    fix_data_checksums(raw)
    with pytest.raises(rt.InvalidProgram, match="key 'sha256-.*' appears twice"):
        load_with(program_path, tmp_path, bytes(raw))


def test_checksums_detect_corruption(saved, tmp_path):
    program_path, data_path = saved
    raw = bytearray(data_path.read_bytes())
    raw[ENTRY0 + 1] ^= 1  # metadata, checksum left stale
    with pytest.raises(rt.InvalidProgram, match="at byte offset 56: metadata checksum mismatch"):
        load_with(program_path, tmp_path, bytes(raw))
    raw = bytearray(data_path.read_bytes())
    raw[-1] ^= 0x40  # a weight byte: not read on a normal load
    load_with(program_path, tmp_path, bytes(raw))
    with pytest.raises(rt.InvalidProgram, match="data segment checksum mismatch"):
        load_with(program_path, tmp_path, bytes(raw), verify_constants=True)


def test_every_truncation_is_rejected(saved, tmp_path):
    program_path, data_path = saved
    raw = data_path.read_bytes()
    for n in list(range(0, 200)) + list(range(200, len(raw), 37)):
        with pytest.raises(rt.InvalidProgram, match="byte offset"):
            load_with(program_path, tmp_path, raw[:n])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_data_files_never_crash(saved, tmp_path, data):
    """Random bytes anywhere in the file, checksums mostly repaired: a clean error naming the
    data file, or a program that runs."""
    program_path, data_path = saved
    raw = bytearray(data_path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.integers(0, 7)):  # mostly repaired, so that mutants reach deeper checks
        fix_data_checksums(raw)
    try:
        load_with(program_path, tmp_path, bytes(raw))
    except (rt.InvalidProgram, rt.InvalidArgument, rt.NotFound) as exc:
        assert "data file" in str(exc) or "constant" in str(exc)
        return
    with rt.Program.load(str(program_path), data_files=[tmp_path / "bad.rtd"]) as program:
        run(program)


# ---- mapped in place --------------------------------------------------------------------------

def test_data_file_is_mapped_not_copied(tmp_path):
    """256 MB of weights in a data file: loading barely moves RSS, and a constant's output view
    points into the file's mapping."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc")
    b = ProgramBuilder()
    m = b.method("forward")
    big = m.constant(bytes(256 << 20), "uint8", (256 << 20,), key="big")
    x = m.input("x", "uint8", (4,))
    m.output(m.add(x, x))
    m.output(big, "weights")
    b.save(tmp_path / "big.rtp", external_data=tmp_path / "big.rtd")
    del b, m, big
    data_path = str(tmp_path / "big.rtd")

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = rss()
    with rt.Program.load(str(tmp_path / "big.rtp"), data_files=[data_path]) as program:
        grown = rss() - before
        with program.load_method("forward", clone_outputs=False) as forward:
            y, weights = forward(bytearray([1, 2, 3, 4]))
            assert y.tolist() == [2, 4, 6, 8] and weights.nbytes == 256 << 20
            address = weights.__array_interface__["data"][0]
            with open("/proc/self/maps") as f:
                spans = [line.split() for line in f if line.rstrip().endswith(data_path)]
            ranges = [tuple(int(v, 16) for v in s[0].split("-")) for s in spans]
            assert any(lo <= address and address + (256 << 20) <= hi for lo, hi in ranges)
            assert address % 64 == 0
    assert grown < 32 << 20, f"load grew RSS by {grown >> 20} MB"


# ---- pickling, ONNX, command line -----------------------------------------------------------

def test_pickle_carries_data_file_paths(saved):
    program_path, data_path = saved
    with rt.Program.load(str(program_path), data_files=[data_path]) as program:
        back = pickle.loads(pickle.dumps(program))
        assert back.data_files == (str(data_path),)
        np.testing.assert_allclose(run(back), reference(X), rtol=1e-5, atol=1e-6)
        back.close()
    with rt.Program.load(program_path.read_bytes(), data_files=[data_path]) as program:
        back = pickle.loads(pickle.dumps(program))
        np.testing.assert_allclose(run(back), reference(X), rtol=1e-5, atol=1e-6)
        back.close()
    module = rt.load(str(program_path), data_files=[data_path])
    again = pickle.loads(pickle.dumps(module))
    np.testing.assert_allclose(np.asarray(again.forward(X)[0]), reference(X), rtol=1e-5,
                               atol=1e-6)
    module.close()
    again.close()


def test_onnx_fused_and_unfused_share_weights(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from runtime_py import onnx as ro
    from tests import onnx_models

    model = onnx_models.mlp(batch=3)
    data_path = tmp_path / "mlp.rtd"
    fused = ro.convert(model, external_data=data_path)
    size = data_path.stat().st_size
    plain = ro.convert(model, fuse=False, external_data=data_path)
    assert data_path.stat().st_size == size  # the same Gemm weights, one copy
    assert len(fused) < 64 << 10 and size > 256 * 512 * 4
    x = RNG.standard_normal((3, 256)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    for data in (fused, plain):
        with rt.Program.load(data, data_files=[data_path]) as program:
            with program.load_method() as forward:
                np.testing.assert_allclose(np.asarray(forward(x)[0]), want, rtol=1e-4,
                                           atol=1e-5)
    module = ro.load(model, external_data=tmp_path / "again.rtd")
    np.testing.assert_allclose(np.asarray(module.forward(x)[0]), want, rtol=1e-4, atol=1e-5)
    module.close()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime_py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_external_data_end_to_end(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from tests import onnx_models

    model = onnx_models.mlp(batch=2)
    onnx.save(model, tmp_path / "mlp.onnx")
    x = RNG.standard_normal((2, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "case.npz", x=x)
    rtp, rtd = str(tmp_path / "mlp.rtp"), str(tmp_path / "mlp.rtd")
    done = cli("convert", str(tmp_path / "mlp.onnx"), "-o", rtp, "--external-data", rtd,
               "--bundle-inputs", str(tmp_path / "case.npz"))
    assert done.returncode == 0, done.stderr
    assert f"wrote weights to {rtd}" in done.stdout
    missing = cli("run", rtp, "--input", f"x={tmp_path / 'x.npy'}")
    assert missing.returncode == 1 and "none was given" in missing.stderr
    assert "(pass --data FILE.rtd)" in missing.stderr
    assert "Traceback" not in missing.stderr
    shown = cli("inspect", rtp, "--data", rtd)
    assert shown.returncode == 0 and f"data file {rtd}" in shown.stdout
    ran = cli("run", rtp, "--data", rtd, "--input", f"x={tmp_path / 'x.npy'}",
              "-o", str(tmp_path / "out.npz"))
    assert ran.returncode == 0, ran.stderr
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(list(np.load(tmp_path / "out.npz").values())[0],
                               session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    checked = cli("verify", rtp, "--data", rtd, "--rtol", "1e-4", "--atol", "1e-5")
    assert checked.returncode == 0 and "1 passed, 0 failed" in checked.stdout
    bench = cli("bench", rtp, "--data", rtd, "--runs", "2", "--warmup", "0", "--threads", "1")
    assert bench.returncode == 0, bench.stderr


# ---- the C ABI directly ------------------------------------------------------------------------

def test_c_abi_misuse_is_refused_with_messages(saved):
    from runtime_py._ffi import ffi, get_lib, to_str

    lib = get_lib()
    program_path, data_path = saved
    out = ffi.new("rt_program **")
    opts = ffi.new("rt_program_options *")

    def fails(status, code, text):
        assert status == code, to_str(lib.rt_last_error())
        assert text in to_str(lib.rt_last_error())
        assert out[0] == ffi.NULL

    path = str(program_path).encode()
    lib.rt_program_options_init(opts)
    opts.version = 7
    fails(lib.rt_program_load_file_v2(out, path, opts), 1, "options version 7")
    lib.rt_program_options_init(opts)
    opts.flags = 1  # RT_PROGRAM_COPY means nothing for a file
    fails(lib.rt_program_load_file_v2(out, path, opts), 1, "unknown flags 0x1")
    lib.rt_program_options_init(opts)
    opts.num_data_files = 2
    fails(lib.rt_program_load_file_v2(out, path, opts), 1, "the path array is NULL")
    data_name = ffi.new("char[]", str(data_path).encode())  # kept alive: the array borrows it
    entries = ffi.new("const char *[]", [data_name, ffi.NULL])
    opts.data_files = entries
    fails(lib.rt_program_load_file_v2(out, path, opts), 1, "data file path 1 is NULL")
    opts.num_data_files = 5000
    fails(lib.rt_program_load_file_v2(out, path, opts), 1, "at most 1024")
    opts.num_data_files = 1
    assert lib.rt_program_load_file_v2(out, path, opts) == 0
    program = ffi.gc(out[0], lib.rt_program_release)
    count = ffi.new("size_t *")
    assert lib.rt_program_bundled_case_count(count, program, b"forward") == 0 and count[0] == 0
    assert lib.rt_program_bundled_case_count(ffi.NULL, program, b"forward") == 1
    assert lib.rt_program_bundled_case_count(count, ffi.NULL, b"forward") == 1
    value = ffi.new("rt_bundled_value *")
    assert lib.rt_program_bundled_input(value, program, b"forward", 0, 0) == 1
    assert "bundled case 0 is out of range (the method has 0)" in to_str(lib.rt_last_error())
    assert lib.rt_program_bundled_expected(value, program, b"nope", 0, 0) == 4
    assert lib.rt_program_bundled_expected(ffi.NULL, program, b"forward", 0, 0) == 1
    # A NULL options pointer means the defaults (no data files); buffer loads take the same
    # options.
    fails(lib.rt_program_load_file_v2(out, path, ffi.NULL), 4, "none was given")
    data = program_path.read_bytes()
    opts.flags = 1  # RT_PROGRAM_COPY
    opts.num_data_files = 0
    fails(lib.rt_program_load_buffer_v2(out, data, len(data), opts), 4, "none was given")
    opts.num_data_files = 1
    assert lib.rt_program_load_buffer_v2(out, data, len(data), opts) == 0
    lib.rt_program_release(out[0])
