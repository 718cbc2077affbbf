"""Without a usable CUDA backend (no driver, no GPU, or a build without kernels) every CUDA
request fails with a clear message naming why, and everything else keeps working. Runs
everywhere: where CUDA is available the checks of its absence skip, and a subprocess pointing
the driver path at a missing file checks the message anyway."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import runtime_py as rt
from runtime_py import cuda
from runtime_py._ffi import ffi, get_lib, to_str
from runtime_py.compiler import ProgramBuilder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
absent = pytest.mark.skipif(cuda.is_available(), reason="CUDA is available here")


def _relu_bytes() -> bytes:
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (3,))))
    return b.to_bytes()


@absent
def test_the_backend_reports_itself_unavailable_with_a_reason():
    assert not rt.backend_available("cuda")
    assert cuda.device_count() == 0
    reason = cuda.unavailable_reason()
    assert any(why in reason for why in ("libcuda.so.1", "cuInit", "no CUDA device",
                                         "no CUDA kernels", "NVIDIA driver"))


def test_the_cpu_backend_is_always_there_and_unknown_names_are_explained():
    assert rt.backend_available("cpu")
    lib = get_lib()
    assert to_str(lib.rt_backend_unavailable_reason(b"cpu")) == ""
    assert "no backend of that name" in to_str(lib.rt_backend_unavailable_reason(b"tpu"))
    assert lib.rt_backend_available(ffi.NULL) == 0


@absent
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_loading_a_cuda_method_fails_naming_why_and_the_program_stays_usable(device):
    with rt.Program.load(_relu_bytes()) as program:
        with pytest.raises(rt.Unsupported) as info:
            program.load_method("forward", device=device)
        message = str(info.value)
        assert f"cannot run on {device if ':' in device else 'cuda:0'}" in message
        assert cuda.unavailable_reason() in message
        with program.load_method("forward") as f:  # the CPU still runs it
            (y,) = f([1.0, -2.0, 3.0])
            assert y.tolist() == [1.0, 0.0, 3.0]


@absent
def test_device_memory_and_copies_fail_cleanly():
    with pytest.raises(rt.Unsupported, match="CUDA backend is not available"):
        rt.Tensor.from_host(bytearray(8))
    lib = get_lib()
    out = ffi.new("void **")
    status = lib.rt_device_alloc(out, {"type": 2, "index": 0}, 16)
    assert status == 5 and out[0] == ffi.NULL  # RT_UNSUPPORTED
    assert "rt_device_alloc" in to_str(lib.rt_last_error())
    lib.rt_device_free({"type": 2, "index": 0}, ffi.NULL)  # a no-op, never a crash


def test_negative_device_index_is_an_invalid_argument():
    with rt.Program.load(_relu_bytes()) as program:
        with pytest.raises(rt.InvalidArgument, match="negative"):
            program.load_method("forward", device=(2, -1))


def test_host_copies_work_without_cuda():
    """rt_tensor_copy between host tensors, strided on both sides, needs no GPU."""
    import array

    lib = get_lib()
    src_data = array.array("f", range(12))  # [3, 4]
    dst_data = array.array("f", [0.0] * 12)
    sizes = ffi.new("int64_t[]", [4, 3])
    src_strides = ffi.new("int64_t[]", [1, 4])  # the transpose of the [3, 4] source
    src = ffi.new("rt_tensor *", {"data": ffi.from_buffer(src_data), "device": {"type": 1},
                                  "rank": 2, "dtype": {"code": 2, "bits": 32, "lanes": 1},
                                  "sizes": sizes, "strides": src_strides})
    dst = ffi.new("rt_tensor *", {"data": ffi.from_buffer(dst_data), "device": {"type": 1},
                                  "rank": 2, "dtype": {"code": 2, "bits": 32, "lanes": 1},
                                  "sizes": sizes, "strides": ffi.NULL})
    assert lib.rt_tensor_copy(dst, src) == 0
    assert list(dst_data) == [float(4 * c + r) for r in range(4) for c in range(3)]
    dst.dtype.bits = 64
    assert lib.rt_tensor_copy(dst, src) == 1
    assert "dtype" in to_str(lib.rt_last_error())


def test_a_missing_driver_library_is_named():
    env = dict(os.environ, RT_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    code = ("import runtime_py.cuda as c; print(c.is_available()); "
            "print(c.unavailable_reason())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert out[0] == "False"
    assert "/nonexistent/libcuda.so.1" in out[1] or "no CUDA kernels" in out[1]
