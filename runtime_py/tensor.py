"""Tensor: a method output (an owned copy or a view) or an attribute view, readable without numpy.

An owned tensor keeps its bytes in a Python bytearray (dense, row-major). A view borrows the
method's memory and keeps the Method object alive: an output view is valid until the method's
next execute or set_input (and reads whatever is there then); an attribute view until the method
is closed. Accessing the data of a view whose method was closed raises ClosedError.

Other libraries read a Tensor without a copy through `__array_interface__` (CPU),
`__cuda_array_interface__` (CUDA) and DLPack (`__dlpack__` / `__dlpack_device__`, any device).
A DLPack capsule keeps the Tensor, and so its bytes or its method's memory, alive until the
consumer's deleter runs: closing the method meanwhile defers freeing its memory until then.
"""
from __future__ import annotations

import itertools
import operator
import platform
import struct
from typing import Any, Optional, Tuple

from . import dtypes as _dt
from ._ffi import ffi
from .errors import ClosedError, InvalidArgument, Unsupported

__all__ = ["Tensor"]

_CPU = (1, 0)
# rt_tensor as laid out in C: data, device {type, index}, rank, dtype {code, bits, lanes},
# sizes, strides (pointers read as integers).
_RT_TENSOR = struct.Struct("=QiiiBBHQQ")
assert _RT_TENSOR.size == ffi.sizeof("rt_tensor")
_BY_CODE_BITS = {d.code << 8 | d.bits: d.name for d in _dt.DTYPES.values()}
_DEVICE_NAMES = {1: "cpu", 2: "cuda"}
_PREVIEW = 8  # elements shown by repr
# PyPy 7.3 aborts the whole process (a fatal RPython NotImplementedError) on tolist() of a 0-d
# memoryview, so there memoryview() of a 0-d tensor has shape (1,) instead of ().
_ZERO_D_SHAPE: Tuple[int, ...] = (1,) if platform.python_implementation() == "PyPy" else ()


def device_name(device: Tuple[int, int]) -> str:
    """"cpu" or "cuda:N" for an rt_device (type, index)."""
    kind, index = device
    name = _DEVICE_NAMES.get(kind, f"device{kind}")
    return name if kind == 1 else f"{name}:{index}"


def parse_device(device: Any) -> Tuple[int, int]:
    """(type, index) of "cpu", "cuda", "cuda:N" or an (type, index) pair."""
    if isinstance(device, tuple) and len(device) == 2:
        return int(device[0]), int(device[1])
    if isinstance(device, str):
        name, _, index = device.partition(":")
        kinds = {"cpu": 1, "cuda": 2}
        if name in kinds and (index.isdigit() or not index):
            if name == "cpu" and index not in ("", "0"):
                raise InvalidArgument(f"invalid device {device!r}: the CPU has index 0")
            return kinds[name], int(index or 0)
    raise InvalidArgument(f"invalid device {device!r}; expected 'cpu', 'cuda' or 'cuda:N'")


def contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """Row-major strides, in elements."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


_DENSE: dict = {}


def _dense_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """contiguous_strides(), memoized (outputs keep asking about the same few shapes)."""
    strides = _DENSE.get(shape)
    if strides is None:
        if len(_DENSE) > 256:
            _DENSE.clear()
        strides = _DENSE[shape] = contiguous_strides(shape)
    return strides


def is_contiguous(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]]) -> bool:
    """Whether strides (in elements, None = dense) describe dense row-major memory."""
    if strides is None:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 0:
            return True
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


MAX_RANK = 16  # RT_MAX_RANK


def checked_shape(shape: Any, what: str) -> Tuple[int, ...]:
    """`shape` as a tuple of ints, each >= 0, at most MAX_RANK of them; InvalidArgument
    naming `what` otherwise."""
    try:
        sizes = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise InvalidArgument(f"{what}: shape {shape!r} is not a sequence of ints") from None
    if len(sizes) > MAX_RANK or any(s < 0 for s in sizes):
        raise InvalidArgument(f"{what}: shape {sizes} must have at most {MAX_RANK} "
                              f"dimensions, none negative")
    return sizes


def numel(shape: Tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def gather(addr: int, itemsize: int, shape: Tuple[int, ...], byte_strides: Tuple[int, ...]) -> bytearray:
    """Copy strided memory at `addr` into a dense row-major bytearray (strides in bytes)."""
    out = bytearray(numel(shape) * itemsize)
    if not out:
        return out
    if not shape:
        ffi.memmove(out, ffi.cast("char *", addr), itemsize)
        return out
    dst = ffi.from_buffer(out)
    inner, inner_stride = shape[-1], byte_strides[-1]
    if inner_stride == itemsize:  # rows are contiguous: one memmove per row
        runs, run, step = 1, inner * itemsize, 0
    else:
        runs, run, step = inner, itemsize, inner_stride
    pos = 0
    for index in itertools.product(*[range(s) for s in shape[:-1]]):
        base = addr + sum(i * s for i, s in zip(index, byte_strides))
        for k in range(runs):
            ffi.memmove(dst + pos, ffi.cast("char *", base + k * step), run)
            pos += run
    return out


def _nest(flat: Any, shape: Tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = numel(shape[1:])
    rest = shape[1:]
    return [_nest(flat[i * step:(i + 1) * step], rest) for i in range(shape[0])]


def _unpack(raw: Any, dtype: str, count: int) -> Tuple[Any, ...]:
    """Flat Python values of `count` dense elements (bfloat16 widened to float32)."""
    if dtype == "bfloat16":
        bits = struct.unpack(f"={count}H", raw)
        return struct.unpack(f"={count}f", struct.pack(f"={count}I", *(b << 16 for b in bits)))
    return struct.unpack(f"={count}{_dt.DTYPES[dtype].format}", raw)


class Tensor:
    """A dense or strided n-d array of one dtype on one device (strides in elements)."""

    __slots__ = ("_addr", "_shape", "_strides", "_dtype", "_device", "_owner", "_readonly",
                 "_cbuf", "__weakref__")

    def __init__(self) -> None:
        raise TypeError("Tensor objects come from Method outputs, attributes or Tensor.from_bytes")

    # ---- construction (internal) --------------------------------------------------------

    @classmethod
    def _owned(cls, data: bytearray, dtype: str, shape: Tuple[int, ...]) -> "Tensor":
        return owned(data, dtype, shape)

    @classmethod
    def _view(cls, addr: int, dtype: str, shape: Tuple[int, ...],
              strides: Optional[Tuple[int, ...]], device: Tuple[int, int], owner: Any,
              readonly: bool) -> "Tensor":
        self = object.__new__(cls)
        self._owner = owner
        self._cbuf = None
        self._addr = addr
        self._shape = shape
        self._strides = None if strides is None or is_contiguous(shape, strides) else strides
        self._dtype = dtype
        self._device = device
        self._readonly = readonly
        return self

    @classmethod
    def _from_rt(cls, t: Any, owner: Any, clone: bool, readonly: bool,
                 raw: Any = None) -> "Tensor":
        """Build from a filled rt_tensor: a dense owned copy, or a view kept alive by owner.

        `raw` may be a cached ffi.buffer(t): the fields are then read in one struct unpack,
        which is what keeps get_outputs cheap."""
        addr, kind, index, rank, code, bits, _, sizes, strided = _RT_TENSOR.unpack_from(
            raw if raw is not None else ffi.buffer(t))
        shape = tuple(ffi.unpack(t.sizes, rank)) if rank > 0 and sizes else ()
        strides = tuple(ffi.unpack(t.strides, rank)) if rank > 0 and strided else None
        if strides is not None and strides == _dense_strides(shape):
            strides = None
        dtype = _BY_CODE_BITS.get(code << 8 | bits) or _dt.from_dlpack(code, bits)
        device = _CPU if kind == 1 and index == 0 else (kind, index)
        if not clone or device is not _CPU:
            view = cls._view(addr, dtype, shape, strides, device, owner, readonly)
            if clone and device[0] == 2:  # a device copy, made by the CUDA helpers
                from .cuda import clone as clone_on_device

                return clone_on_device(view)
            return view
        itemsize = bits >> 3
        nbytes = numel(shape) * itemsize
        if strides is None or is_contiguous(shape, strides):
            data = bytearray(nbytes)
            if nbytes:
                ffi.memmove(data, t.data, nbytes)
        else:
            data = gather(addr, itemsize, shape, tuple(s * itemsize for s in strides))
        return cls._owned(data, dtype, shape)

    @classmethod
    def from_bytes(cls, data: Any, dtype: Any, shape: Any) -> "Tensor":
        """An owned tensor holding a copy of `data` (any buffer) read as dense dtype/shape."""
        name = _dt.normalize(dtype)
        shape = checked_shape(shape, "Tensor.from_bytes")
        view = memoryview(data)
        raw = bytearray(view) if view.c_contiguous else bytearray(view.tobytes())
        if len(raw) != numel(shape) * _dt.DTYPES[name].itemsize:
            raise InvalidArgument(
                f"{len(raw)} bytes do not hold a {name} tensor of shape {shape}")
        return cls._owned(raw, name, shape)

    # ---- properties ---------------------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements."""
        return self._strides if self._strides is not None else contiguous_strides(self._shape)

    @property
    def device(self) -> str:
        return device_name(self._device)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return numel(self._shape)

    @property
    def itemsize(self) -> int:
        return _dt.DTYPES[self._dtype].bits >> 3

    @property
    def nbytes(self) -> int:
        return numel(self._shape) * self.itemsize

    @property
    def is_view(self) -> bool:
        """True when the tensor borrows a method's memory instead of owning a copy."""
        return not isinstance(self._owner, bytearray)

    @property
    def readonly(self) -> bool:
        return self._readonly

    @property
    def is_contiguous(self) -> bool:
        return self._strides is None

    # ---- data access --------------------------------------------------------------------

    def _address(self) -> int:
        """Data pointer as an int; raises ClosedError for a view of a closed method."""
        owner = self._owner
        if isinstance(owner, bytearray):
            if self._cbuf is None:
                self._cbuf = ffi.from_buffer(owner)
                self._addr = int(ffi.cast("uintptr_t", self._cbuf))
            return self._addr
        if getattr(owner, "closed", False):
            raise ClosedError(f"tensor is a view of closed method {getattr(owner, 'name', '?')!r}")
        return self._addr

    def _pinned(self) -> Any:
        """A char * at the data for an export that may outlive this call (a numpy array, a
        memoryview). A view of a method's memory takes a hold on that memory first (as a DLPack
        export does), released when the pin is collected: this tensor keeps it, and so does any
        buffer made from it, so the method's close() frees the memory only after the last of
        them (a numpy array of a view used after close read freed memory)."""
        owner = self._owner
        if isinstance(owner, bytearray):
            self._address()
            return self._cbuf
        pin = self._cbuf
        if pin is None:
            hold = getattr(owner, "_hold_memory", None)
            if hold is None:
                return ffi.cast("char *", self._address())
            try:
                release = hold()
            except ClosedError:
                raise ClosedError(f"tensor is a view of closed method "
                                  f"{getattr(owner, 'name', '?')!r}") from None
            pin = self._cbuf = ffi.gc(ffi.cast("char *", self._addr), lambda _: release())
        return pin

    def _require_cpu(self, what: str) -> None:
        if self._device != _CPU:
            raise Unsupported(f"{what} needs a CPU tensor; this one is on {self.device}")

    def _dense(self) -> Any:
        """A 1-d byte memoryview of the dense data (a copy when the tensor is strided)."""
        self._require_cpu("reading the data")
        owner = self._owner
        if isinstance(owner, bytearray):
            return memoryview(owner)
        addr = self._address()
        itemsize = self.itemsize
        if self._strides is not None:
            return memoryview(gather(addr, itemsize, self._shape,
                                     tuple(s * itemsize for s in self._strides)))
        nbytes = self.nbytes
        if nbytes == 0:
            return memoryview(b"")
        mv = memoryview(ffi.buffer(self._pinned(), nbytes))  # the buffer keeps the pin
        return mv.toreadonly() if self._readonly else mv

    @property
    def __array_interface__(self) -> dict:
        if self._device != _CPU:
            raise AttributeError("__array_interface__ (the tensor is not on the CPU)")
        itemsize = self.itemsize
        return {
            "version": 3,
            "typestr": _dt.DTYPES[self._dtype].typestr,
            # numpy keeps this tensor (and so its pin) as the array's base
            "data": (int(ffi.cast("uintptr_t", self._pinned())), self._readonly),
            "shape": self._shape,
            "strides": None if self._strides is None else tuple(s * itemsize for s in self._strides),
        }

    @property
    def __cuda_array_interface__(self) -> dict:
        if self._device[0] != 2:
            raise AttributeError("__cuda_array_interface__ (the tensor is not on a CUDA device)")
        itemsize = self.itemsize
        return {
            "version": 3,
            "typestr": _dt.DTYPES[self._dtype].typestr,
            # torch and cupy keep this tensor (and so its pin) alive with their array
            "data": (int(ffi.cast("uintptr_t", self._pinned())), self._readonly),
            "shape": self._shape,
            "strides": None if self._strides is None else tuple(s * itemsize for s in self._strides),
            "stream": None,
        }

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(DLPack device type, index): (1, 0) for the CPU, (2, N) for CUDA device N."""
        return self._device

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of this tensor's memory (zero copy unless copy=True).

        A versioned capsule ("dltensor_versioned", DLPack 1.0, carrying the read-only flag)
        when the consumer passes max_version >= (1, 0), else a legacy "dltensor" one, which
        cannot say read-only: a read-only view is then refused with BufferError. `stream` is
        accepted for CUDA tensors and needs no wait: a result is complete once execute has
        returned. Raises BufferError for what cannot be exported (another device, a closed
        view, an interpreter without PyCapsule access)."""
        from . import _capsule, _dlpack

        if dl_device is not None and (int(dl_device[0]), int(dl_device[1])) != self._device:
            raise BufferError(f"cannot export a {self.device} tensor to DLPack device "
                              f"{_dlpack.device_text((int(dl_device[0]), int(dl_device[1])))}"
                              f"{'' if copy is False else ' (no cross-device copies)'}")
        if self._device == _CPU and stream not in (None, -1):
            raise BufferError(f"stream {stream!r} given for a CPU tensor (must be None)")
        versioned = max_version is not None and int(max_version[0]) >= 1
        source, flags = self, 0
        if copy:
            self._require_cpu("a DLPack copy")
            source, flags = self.copy(), _dlpack.FLAG_IS_COPIED
        elif self._readonly:
            if not versioned:
                raise BufferError("the tensor is a read-only view and a legacy (unversioned) "
                                  "DLPack capsule cannot say so: ask with max_version=(1, 0), "
                                  "pass copy=True, or use a cloned output")
            flags = _dlpack.FLAG_READ_ONLY
        try:
            addr = source._address()
        except ClosedError as exc:
            raise BufferError(str(exc)) from None
        owner = source._owner
        hold = getattr(owner, "_hold_memory", None)
        release = hold() if hold is not None else None
        try:
            return _dlpack.export(source, addr, versioned, flags, release)
        except _capsule.CapsuleError as exc:
            raise BufferError(f"cannot make a DLPack capsule here: {exc}") from None

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy conversion: zero copy through __array_interface__ unless asked otherwise."""
        import numpy as np

        self._require_cpu("numpy conversion")
        arr = np.asarray(self)
        if self._dtype == "bfloat16":
            try:
                import ml_dtypes

                arr = arr.view(ml_dtypes.bfloat16)
            except ImportError:
                pass
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"converting {self._dtype} to {np.dtype(dtype)} needs a copy")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def numpy(self) -> Any:
        """A numpy array sharing this tensor's memory (imports numpy)."""
        return self.__array__()

    def memoryview(self) -> memoryview:
        """A memoryview cast to the dtype's format char and the shape (1-d and empty when the
        tensor is empty; float16 falls back to 'H' bits where memoryview can't cast to 'e';
        bfloat16 is 'H' bits; on PyPy a 0-d tensor gives shape (1,)). Zero copy for dense CPU
        tensors, a copy for strided ones."""
        mv = self._dense()
        fmt = _dt.DTYPES[self._dtype].format
        shape = (self._shape or _ZERO_D_SHAPE) if self.size else (0,)
        try:
            return mv.cast(fmt) if not self.size else mv.cast(fmt, shape)
        except ValueError:
            if fmt != "e":
                raise
            return mv.cast("H") if not self.size else mv.cast("H", shape)

    def tobytes(self) -> bytes:
        """The data as dense row-major bytes."""
        return bytes(self._dense())

    def tolist(self) -> Any:
        """Nested lists of Python numbers (a scalar for a 0-d tensor); bfloat16 as floats."""
        count = self.size
        flat = _unpack(self._dense(), self._dtype, count) if count else ()
        return _nest(flat, self._shape)

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.size != 1:
            raise InvalidArgument(f"item() needs a tensor of one element; shape is {self._shape}")
        return _unpack(self._dense(), self._dtype, 1)[0]

    def to_host(self) -> "Tensor":
        """A dense CPU copy (from the device for CUDA tensors)."""
        from .cuda import to_host

        return to_host(self)

    @classmethod
    def from_host(cls, data: Any, device: Any = "cuda") -> "Tensor":
        """A copy of host data (a CPU Tensor or any buffer) on a CUDA device, to stage inputs."""
        from .cuda import from_host

        return from_host(data, device)

    def copy(self) -> "Tensor":
        """An owned dense copy (CPU tensors)."""
        return Tensor._owned(bytearray(self._dense()), self._dtype, self._shape)

    def __reduce__(self) -> Any:
        """Pickled as an owned dense copy of its data (a view too), so results travel between
        processes."""
        owner = self._owner
        data = owner if isinstance(owner, bytearray) else self.tobytes()
        return _unpickle_tensor, (data, self._dtype, self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __repr__(self) -> str:
        head = f"Tensor(shape={self._shape}, dtype={self._dtype!r}, device={self.device!r}"
        if self._device != _CPU or (self.is_view and getattr(self._owner, "closed", False)):
            return head + ")"
        count = self.size
        if count <= _PREVIEW:
            data = repr(self.tolist())
        else:
            mv = self._dense()
            first = _unpack(mv[:_PREVIEW * self.itemsize], self._dtype, _PREVIEW)
            data = "[" + ", ".join(repr(v) for v in first) + ", ...]"
        return f"{head}, data={data})"


def owned(data: bytearray, dtype: str, shape: Tuple[int, ...], _new: Any = object.__new__,
          _tensor: Any = Tensor) -> Tensor:
    """A Tensor owning `data` (dense dtype / shape): a plain function, since every call of a
    method with clone_outputs makes one per output."""
    self = _new(_tensor)
    self._owner = data
    self._cbuf = None
    self._addr = 0
    self._shape = shape
    self._strides = None
    self._dtype = dtype
    self._device = _CPU
    self._readonly = False
    return self


def _unpickle_tensor(data: Any, dtype: str, shape: Tuple[int, ...]) -> Tensor:
    """A pickled Tensor, checked as any outside bytes are: a pickle can be written by hand,
    and a shape its bytes do not fill would make a view reach past them."""
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgument(f"a Tensor pickle holds {type(data).__name__} data, not bytes")
    return Tensor.from_bytes(data, dtype, shape)
