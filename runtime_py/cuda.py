"""CUDA devices: availability, device count, and copies of tensors between the host and a GPU.

The CUDA backend lives in libruntime itself (it loads the NVIDIA driver with dlopen on first
use), so nothing here needs CUDA, numpy or torch to import. Device tensors made here own their
memory (freed when the tensor is garbage collected); method outputs on a device are either such
copies (clone_outputs=True) or views into the method's device memory.
"""
from __future__ import annotations

from typing import Any, Tuple

from . import dtypes as _dt
from ._ffi import ffi, get_lib, to_str
from .errors import InvalidArgument, _check
from .tensor import Tensor, numel, parse_device

__all__ = ["is_available", "device_count", "unavailable_reason", "to_host", "from_host"]

_CPU = (1, 0)
_CUDA = 2


def is_available() -> bool:
    """True when this process can run methods on a CUDA device (driver, GPU and kernels)."""
    return bool(get_lib().rt_backend_available(b"cuda"))


def device_count() -> int:
    """Number of CUDA devices methods can use (0 when the backend is unavailable)."""
    return int(get_lib().rt_cuda_device_count())


def unavailable_reason() -> str:
    """Why is_available() is False (no libcuda.so.1, no GPU, a build without kernels); ""
    when it is available."""
    return to_str(get_lib().rt_backend_unavailable_reason(b"cuda"))


class _DeviceMemory:
    """Memory from rt_device_alloc, freed exactly once (close() or garbage collection)."""

    __slots__ = ("device", "address", "_handle", "__weakref__")

    def __init__(self, device: Tuple[int, int], nbytes: int) -> None:
        lib = get_lib()
        out = ffi.new("void **")
        dev = ffi.new("rt_device *", {"type": device[0], "index": device[1]})
        _check(lib.rt_device_alloc(out, dev[0], nbytes))
        self.device = device
        self.address = int(ffi.cast("uintptr_t", out[0]))
        self._handle = ffi.gc(out[0], lambda p: lib.rt_device_free(dev[0], p))

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        if self._handle is not None:
            ffi.release(self._handle)
            self._handle = None


def _descriptor(address: int, dtype: str, shape: Tuple[int, ...], strides: Any,
                device: Tuple[int, int]) -> Tuple[Any, ...]:
    """An rt_tensor (and the arrays it borrows) describing memory at `address`."""
    d = _dt.DTYPES[dtype]
    sizes = ffi.new("int64_t[]", list(shape) or [0])
    stride_arr = ffi.new("int64_t[]", list(strides)) if strides is not None and shape else \
        ffi.NULL
    t = ffi.new("rt_tensor *")
    t.data = ffi.cast("void *", address)
    t.device.type, t.device.index = device
    t.rank = len(shape)
    t.dtype.code, t.dtype.bits, t.dtype.lanes = d.code, d.bits, 1
    t.sizes = sizes
    t.strides = stride_arr
    return t, sizes, stride_arr


def _copy(dst: Tuple[Any, ...], src: Tuple[Any, ...]) -> None:
    _check(get_lib().rt_tensor_copy(dst[0], src[0]))


def to_host(tensor: Tensor) -> Tensor:
    """A dense CPU copy of `tensor` (on any device); the call returns once it is complete."""
    data = bytearray(tensor.nbytes)
    if tensor.nbytes:
        keep = ffi.from_buffer(data)
        dst = _descriptor(int(ffi.cast("uintptr_t", keep)), tensor.dtype, tensor.shape, None,
                          _CPU)
        src = _descriptor(tensor._address(), tensor.dtype, tensor.shape, tensor._strides,
                          tensor._device)
        _copy(dst, src)
    return Tensor._owned(data, tensor.dtype, tensor.shape)


def _device_tensor(dtype: str, shape: Tuple[int, ...], device: Tuple[int, int]) -> Tensor:
    memory = _DeviceMemory(device, numel(shape) * _dt.DTYPES[dtype].itemsize)
    return Tensor._view(memory.address, dtype, shape, None, device, memory, False)


def from_host(data: Any, device: Any = "cuda") -> Tensor:
    """A dense copy of `data` on `device` ("cuda", "cuda:N"): a CPU Tensor, or any object
    with the buffer protocol (numpy arrays, array.array, bytes with a format)."""
    dev = parse_device(device)
    if dev[0] != _CUDA:
        raise InvalidArgument(f"from_host needs a CUDA device, not {device!r}")
    if isinstance(data, Tensor):
        if data._device != _CPU:
            raise InvalidArgument(f"from_host takes a host tensor; this one is on {data.device}")
        src_addr, dtype, shape, strides, keep = (data._address(), data.dtype, data.shape,
                                                 data._strides, data)
    else:
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes()).cast(view.format, view.shape)
        dtype = _dt.from_format(view.format)
        shape, strides = tuple(view.shape), None
        keep = ffi.from_buffer(view)
        src_addr = int(ffi.cast("uintptr_t", keep))
    out = _device_tensor(dtype, shape, dev)
    if out.nbytes:
        _copy(_descriptor(out._address(), dtype, shape, None, dev),
              _descriptor(src_addr, dtype, shape, strides, _CPU))
    del keep
    return out


def clone(tensor: Tensor) -> Tensor:
    """A dense copy of a device tensor on the same device (how device outputs are cloned)."""
    out = _device_tensor(tensor.dtype, tensor.shape, tensor._device)
    if out.nbytes:
        _copy(_descriptor(out._address(), out.dtype, out.shape, None, out._device),
              _descriptor(tensor._address(), tensor.dtype, tensor.shape, tensor._strides,
                          tensor._device))
    return out
