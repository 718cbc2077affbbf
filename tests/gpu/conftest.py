"""GPU tests run only where the CUDA backend is available (a GPU, its driver and a build with
kernels), or under the fake driver of tests/cuda_emu (see tests/test_cuda_emulated.py)."""
import os

import pytest

from runtime_py import cuda

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    # The hook sees the whole session's items: mark only this folder's.
    if cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no CUDA: {cuda.unavailable_reason()}")
    for item in items:
        if os.path.dirname(os.path.abspath(str(item.fspath))).startswith(HERE):
            item.add_marker(skip)
