"""GPU tests run only where the CUDA backend is available (a GPU, its driver and a build with
kernels), or under the fake driver of tests/cuda_emu (see tests/test_cuda_emulated.py)."""
import pytest

from runtime_py import cuda


def pytest_collection_modifyitems(config, items):
    if cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no CUDA: {cuda.unavailable_reason()}")
    for item in items:
        item.add_marker(skip)
