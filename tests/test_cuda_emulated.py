"""The CUDA backend without a GPU: tests/gpu run in a subprocess against tests/cuda_emu, a fake
libcuda.so.1 that runs the backend's real kernels on the CPU (and a fake cuBLAS), so the
backend's host code, parameter blocks, kernels and bindings are all exercised here. Needs a C++
compiler and the CUDA headers (cuda_fp16.h, cuda_bf16.h); skips without them."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from runtime_py import cuda

pytest.importorskip("numpy")  # tests/gpu compare against numpy arrays
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMU = os.path.join(ROOT, "tests", "cuda_emu")


def _cuda_include() -> str:
    candidates = [os.path.join(os.environ.get(v, ""), "include") for v in ("CUDA_HOME",
                                                                           "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include"))
    candidates.append("/usr/local/cuda/include")
    for path in candidates:
        if os.path.exists(os.path.join(path, "cuda_bf16.h")):
            return path
    pytest.skip("the CUDA headers (cuda_fp16.h, cuda_bf16.h) are not installed")


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    if "no CUDA kernels" in cuda.unavailable_reason():
        pytest.skip("this build of libruntime has no CUDA kernels")
    cxx, cc = shutil.which("g++") or shutil.which("c++"), shutil.which("gcc") or \
        shutil.which("cc")
    if not cxx or not cc:
        pytest.skip("no C/C++ compiler for the fake driver")
    out = tmp_path_factory.mktemp("cuda_emu")
    driver, blas = str(out / "libfakecuda.so"), str(out / "libfakecublas.so")
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{_cuda_include()}",
                    "-o", driver, os.path.join(EMU, "fake_cuda.cpp")], check=True)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", blas,
                    os.path.join(EMU, "fake_cublas.c")], check=True)
    return driver, blas


def _run_gpu_tests(driver: str, blas: str, *args: str) -> str:
    env = dict(os.environ, RT_CUDA_DRIVER=driver, RT_CUBLAS=blas)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout


def test_gpu_suite_passes_on_the_emulator_with_cublas(fakes):
    out = _run_gpu_tests(*fakes, "tests/gpu")
    assert " passed" in out and "failed" not in out


def test_products_pass_on_the_builtin_gemm_kernel(fakes):
    out = _run_gpu_tests(fakes[0], "off", "tests/gpu/test_cuda_ops.py",
                         "tests/gpu/test_cuda_rnn.py", "-k",
                         "matmul or linear or conv2d or attributes or dynamic or matches or "
                         "larger")
    assert " passed" in out and "failed" not in out


def test_the_host_cannot_read_device_memory_between_driver_calls(fakes):
    """Device memory under the fake driver is out of the host's reach except inside its calls,
    as on a GPU. Before, it was plain host memory, so host code reading a device pointer passed
    here and crashed on the H200 (qlinear_matmul's prepare reading a y_zero_point input)."""
    code = ("import array, ctypes, runtime_py as rt\n"
            "t = rt.Tensor.from_host(array.array('f', [1.5] * 16))\n"
            "print('round trip', t.to_host().tolist()[:2], flush=True)\n"
            "ctypes.string_at(t.__cuda_array_interface__['data'][0], 4)\n"
            "print('read device memory from the host', flush=True)\n")
    env = dict(os.environ, RT_CUDA_DRIVER=fakes[0], RT_CUBLAS=fakes[1])
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert "round trip [1.5, 1.5]" in proc.stdout, proc.stdout + proc.stderr
    assert "from the host" not in proc.stdout
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
