"""Turning Python objects into bound method inputs (pure Python; numpy only if the object is one).

Accepted for a tensor input, in this order:
- runtime_py.Tensor (its memory is bound by pointer);
- Python bool / int / float: a 0-d tensor of the expected dtype (of the expected shape when
  that is static with one element);
- objects with `__array_interface__` (numpy, ...): pointer, typestr, shape and byte strides;
  byte strides that are not a multiple of the item size are copied to a dense buffer;
- DLPack: a capsule, or an object with `__dlpack__` / `__dlpack_device__` (torch, cupy, jax):
  a versioned capsule is asked for first (see _dlpack.py); the producer stays alive and its
  deleter runs when the input is bound again or the method closed;
- objects with `__cuda_array_interface__` (v2 / v3: device memory of the method's CUDA device;
  a v3 `stream` is synchronized before binding);
- anything with the buffer protocol (bytes, bytearray, array.array, memoryview, mmap): its format,
  shape and strides; a non-contiguous memoryview is copied with .tobytes(), since a pure-Python
  reader cannot get its base pointer;
- `(pointer, dtype, shape, strides)` or `(pointer, dtype, shape, strides, device)`: pointer an
  int address or cffi pointer, strides in elements or None for dense; the caller keeps the
  memory valid until the input is set again;
- nested lists / tuples of numbers, packed into the expected dtype;
- anything else with `__array__`, through numpy.
Device memory (CUDA through DLPack or the CUDA array interface) given to a CPU method is refused
with an error naming the input, before anything reads it.
A dense buffer whose rank or dtype differs from a static expected shape is read as that shape
when its byte count matches exactly and its dtype is the expected one or raw bytes (bytes,
bytearray, a memoryview of format 'B'; not a numpy uint8 array): this lets a bytearray or a
flat array.array feed a [32, 256] input. Other dtype mismatches are left to the library, whose
message names the method, the input and both dtypes.
"""
from __future__ import annotations

import array
import operator
import platform
import struct
from typing import Any, Optional, Tuple

from . import _capsule, _dlpack
from . import _values as _v
from . import dtypes as _dt
from ._ffi import cuda_stream_synchronize, ffi, from_buffer
from .errors import InvalidArgument, Unsupported
from .tensor import Tensor, numel, parse_device

_CPU = (1, 0)
# The repeated-array short paths (_repeated, prepare) read arr.dtype and arr.shape, which on PyPy
# (numpy through cpyext) leak about 100 bytes per read; PyPy's JIT makes the full path fast.
_REPEAT_PATH = platform.python_implementation() == "CPython"
# Reusing the export of the very array bound last (prepare) relies on the exporter refusing to
# resize while exported: CPython's array.array and numpy do; PyPy's array.array does not.
_REUSE_EXPORTS = _REPEAT_PATH
# PyPy's array.array and bytearray may even be resized while a binding points into them, which
# frees the memory a later execute would read: there they are bound as a copy (and refused for
# allow_mutate, which needs the caller's own memory).
_COPY_RESIZABLE = not _REUSE_EXPORTS
_RESIZABLE_COPY = "a copy: PyPy lets an array.array or bytearray be resized while bound"
_RAW_FORMATS = ("B", "c", "<B", "=B", "@B")


class Slot:
    """One input: its expectations and the cffi objects reused on every bind.

    `t` is this input's entry of the method's rt_tensor array, which rt_method_run reads: a
    tensor input's descriptor, or for a scalar input a 0-d int64 / float64 view of `scalar`
    (scalar_value fills it)."""

    __slots__ = ("index", "label", "kind", "dtype", "shape", "rank", "static", "nbytes", "t",
                 "sizes", "strides", "scalar", "device", "last_dtype", "last_shape",
                 "last_strided", "last_device", "readonly", "repeat", "last", "copy")

    def __init__(self, method: str, index: int, info: Any, device: Tuple[int, int],
                 t: Any) -> None:
        self.index = index
        name = f" ({info.name!r})" if info.name else ""
        self.label = f"method {method!r}: input {index}{name}"
        self.kind = info.kind_code
        self.dtype = info.dtype
        self.shape = info.shape
        self.rank = len(info.shape)
        self.static = not info.dynamic
        self.nbytes = numel(info.shape) * _dt.DTYPES[info.dtype].itemsize if info.dtype else -1
        self.device = device
        self.t = t
        self.sizes = ffi.new("int64_t[16]")
        self.strides = ffi.new("int64_t[16]")
        self.t.sizes = self.sizes
        self.t.dtype.lanes = 1
        self.t.strides = ffi.NULL
        # What slot.t holds now, so that a bind rewrites only the fields that change.
        self.last_dtype: Optional[str] = None
        self.last_shape: Optional[Tuple[int, ...]] = None
        self.last_strided = False
        self.last_device: Optional[Tuple[int, int]] = None
        self.copy: Any = None  # the buffer a resizable input is copied into (_COPY_RESIZABLE)
        self.scalar = ffi.new("rt_scalar *")
        if self.kind in (_v.INT, _v.DOUBLE, _v.BOOL):
            double = self.kind == _v.DOUBLE
            t.data = ffi.addressof(self.scalar[0], "d" if double else "i")
            t.dtype.code, t.dtype.bits = (2, 64) if double else (0, 64)  # float64 / int64
            t.rank = 0
            t.device.type, t.device.index = _CPU
        # Why the value bound last must not be written ("" when it may): allow_mutate checks it.
        self.readonly = ""
        # (type, dtype, shape, strides) of the last dense, writable array bound as it was, or
        # (array.array, typecode, length, None) of the last array.array: another value
        # matching it needs only a new data pointer (see _repeated).
        self.repeat: Optional[Tuple[Any, Any, Any, Any]] = None
        # (value, export) of the array that slot.t describes now, when it took the short path
        # (see prepare); cleared by tensor_value and when the method closes.
        self.last: Optional[Tuple[Any, Any]] = None


def scalar_value(slot: Slot, value: Any) -> Any:
    """Fill slot.scalar from a Python (or numpy) scalar; returns the rt_scalar pointer."""
    if isinstance(value, Tensor):
        value = value.item()
    s = slot.scalar
    kind = slot.kind
    try:
        if kind == _v.DOUBLE:
            s.d = float(value)
        elif kind == _v.INT:
            s.i = operator.index(value)
        elif kind == _v.BOOL:
            flag = operator.index(value) if not hasattr(value, "dtype") else int(bool(value))
            if flag not in (0, 1):
                raise ValueError(flag)
            s.i = flag
        else:
            raise Unsupported(f"{slot.label} is of a kind runtime_py cannot pass ({kind})")
    except (TypeError, ValueError, OverflowError) as exc:
        want = {_v.DOUBLE: "a float", _v.INT: "an int", _v.BOOL: "a bool"}[kind]
        raise InvalidArgument(f"{slot.label} expects {want}, got {value!r}") from exc
    s.kind = kind
    return s


def _pack(slot: Slot, values: list, shape: Tuple[int, ...]) -> Tuple[Any, str, Tuple[int, ...]]:
    """Pack Python numbers into a bytearray of the slot's dtype."""
    dtype = slot.dtype
    count = len(values)
    try:
        if dtype == "bfloat16":
            data = bytearray(struct.pack(f"={count}H", *map(_dt.bfloat16_bits, values)))
        else:
            data = bytearray(struct.pack(f"={count}{_dt.DTYPES[dtype].format}", *values))
    except (struct.error, OverflowError) as exc:
        raise InvalidArgument(f"{slot.label}: cannot store {values[:4]!r} as {dtype}: {exc}") from None
    return data, dtype, shape


def _from_list(slot: Slot, value: Any) -> Tuple[Any, str, Tuple[int, ...]]:
    shape = []
    probe = value
    while isinstance(probe, (list, tuple)):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    flat = value
    for _ in range(len(shape) - 1):
        flat = [x for row in flat for x in row]
    if len(flat) != numel(tuple(shape)):
        raise InvalidArgument(f"{slot.label}: nested lists are ragged")
    return _pack(slot, list(flat), tuple(shape))


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _dims(slot: Slot, what: str, items: Any, rank: Optional[int] = None) -> Tuple[int, ...]:
    """Sizes or strides from an untrusted object, as a tuple of ints that fit int64 (anything
    else is InvalidArgument naming the input; the library checks the values themselves)."""
    try:
        dims = tuple(operator.index(i) for i in items)
    except TypeError:
        raise InvalidArgument(f"{slot.label}: {what} {items!r} must be integers") from None
    if any(d < _INT64_MIN or d > _INT64_MAX for d in dims):
        raise InvalidArgument(f"{slot.label}: {what} {dims} do not fit int64")
    if rank is not None and len(dims) != rank:
        raise InvalidArgument(f"{slot.label}: {len(dims)} {what} for {rank} dimensions")
    return dims


def _interface(slot: Slot, iface: dict, obj: Any, on_device: bool = False
               ) -> Tuple[Any, str, Tuple, Optional[Tuple], Any, bool]:
    """(pointer, dtype, shape, element strides, keepalive, read-only) of an
    __array_interface__ (or, on_device, a __cuda_array_interface__: never read from here)."""
    if iface.get("mask") is not None:
        raise InvalidArgument(f"{slot.label}: masked arrays are not supported")
    try:
        dtype = _dt.from_typestr(iface["typestr"])
    except InvalidArgument as exc:
        raise InvalidArgument(f"{slot.label}: {exc}") from None
    shape = _dims(slot, "sizes", iface["shape"])
    data = iface.get("data")
    readonly = False
    if data is None or not isinstance(data, tuple):
        if on_device:
            raise InvalidArgument(f"{slot.label}: __cuda_array_interface__ has no data pointer")
        buf, start = from_buffer(obj if data is None else data)
        addr = int(ffi.cast("uintptr_t", start)) + iface.get("offset", 0)
        keep: Any = (obj, buf)
        readonly = bool(getattr(memoryview(obj if data is None else data), "readonly", False))
    else:
        addr, keep, readonly = data[0], obj, bool(data[1]) if len(data) > 1 else False
    strides = iface.get("strides")
    if strides is None:
        return addr, dtype, shape, None, keep, readonly
    strides = _dims(slot, "strides", strides, len(shape))
    itemsize = _dt.DTYPES[dtype].itemsize
    if any(s % itemsize for s in strides):
        if on_device:
            raise InvalidArgument(f"{slot.label}: byte strides {strides} are not multiples of "
                                  f"the item size {itemsize}")
        from .tensor import gather

        dense = gather(addr, itemsize, shape, tuple(strides))
        keep = ffi.from_buffer(dense)
        return keep, dtype, shape, None, keep, False
    return addr, dtype, shape, tuple(s // itemsize for s in strides), keep, readonly


def _cuda_stream_sync(slot: Slot, stream: int) -> None:
    """Wait for the producer's CUDA stream (CUDA array interface v3), with the driver API."""
    try:
        status = cuda_stream_synchronize(stream)
    except OSError as exc:
        raise InvalidArgument(f"{slot.label}: cannot load the CUDA driver to synchronize "
                              f"stream {stream:#x}: {exc}") from None
    if status:
        raise InvalidArgument(f"{slot.label}: cuStreamSynchronize(stream {stream:#x}) failed "
                              f"with CUDA error {status}")


def _cuda_interface(slot: Slot, iface: dict, obj: Any) -> Tuple[Any, ...]:
    """A __cuda_array_interface__ (v2 / v3). Its memory is on a CUDA device, which one the
    interface does not say: the method's own (the CUDA backend checks the pointer)."""
    device = _dlpack.check_device(slot.label, (_dlpack.CUDA, slot.device[1]), slot.device,
                                  "__cuda_array_interface__")
    ptr, dtype, shape, strides, keep, readonly = _interface(slot, iface, obj, on_device=True)
    stream = iface.get("stream")
    if stream is not None:  # v3: the producer's stream; 0 is ambiguous and forbidden
        if isinstance(stream, bool) or not isinstance(stream, int) or stream == 0:
            raise InvalidArgument(f"{slot.label}: __cuda_array_interface__ stream {stream!r} is "
                                  f"not a CUDA stream handle (0 is not allowed)")
        _cuda_stream_sync(slot, stream)
    why = "__cuda_array_interface__ marks it read-only" if readonly else ""
    return ptr, dtype, shape, strides, device, keep, False, why


# memoryview format -> dtype name: the native chars up front, other spellings on first sight.
_FORMATS = {c: _dt.from_format(c) for c in "bBhHiIlLqQnNefd?c"}


def _format_dtype(slot: Slot, fmt: str) -> str:
    dtype = _FORMATS.get(fmt)
    if dtype is None:
        try:
            dtype = _FORMATS[fmt] = _dt.from_format(fmt)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{slot.label}: {exc}") from None
    return dtype


def _slow(slot: Slot, value: Any, view: Optional[memoryview]) -> Tuple[Any, ...]:
    """(pointer, dtype, shape, strides, device, keep, raw_bytes, read-only reason) of the less
    common inputs."""
    iface = getattr(value, "__array_interface__", None)
    if iface is not None:
        ptr, dtype, shape, strides, keep, readonly = _interface(slot, iface, value)
        why = "__array_interface__ marks it read-only" if readonly else ""
        return ptr, dtype, shape, strides, _CPU, keep, False, why
    if _capsule.is_capsule(value) or hasattr(value, "__dlpack__"):
        try:
            if _capsule.is_capsule(value):
                got = _dlpack.import_capsule(slot.label, value, slot.device)
            else:
                got = _dlpack.import_object(slot.label, value, slot.device)
        except _capsule.CapsuleError as exc:
            if _capsule.is_capsule(value):
                raise InvalidArgument(
                    f"{slot.label}: cannot read a DLPack capsule: {exc}") from None
            got = None  # fall through to the other interfaces the object may have
        if got is not None:
            why = "the DLPack capsule is flagged read-only" if got.readonly else ""
            return got.addr, got.dtype, got.shape, got.strides, got.device, got.keep, False, why
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return _cuda_interface(slot, iface, value)
    if view is not None:  # non-contiguous (copied), or a format spelled unusually
        dtype = _format_dtype(slot, view.format)
        keep, ptr = from_buffer(view if view.c_contiguous else view.tobytes())
        why = "read-only buffer" if view.readonly and view.c_contiguous else ""
        return ptr, dtype, tuple(view.shape), None, _CPU, keep, view.format in _RAW_FORMATS, why
    if isinstance(value, tuple) and len(value) in (4, 5) and \
            not isinstance(value[1], (int, float, list, tuple)):
        shape = _dims(slot, "sizes", value[2])
        strides = None if value[3] is None else _dims(slot, "strides", value[3], len(shape))
        device = parse_device(value[4]) if len(value) == 5 else _CPU
        if device != _CPU:
            device = _dlpack.check_device(slot.label, device, slot.device, "raw pointer")
        return value[0], _dt.normalize(value[1]), shape, strides, device, value, False, ""
    if isinstance(value, (list, tuple)):
        data, dtype, shape = _from_list(slot, value)
        keep = ffi.from_buffer(data)
        return keep, dtype, shape, None, _CPU, keep, False, ""
    if hasattr(value, "__array__"):
        import numpy

        return _slow(slot, numpy.asarray(value), None)
    raise InvalidArgument(f"{slot.label}: cannot use a {type(value).__name__} as a tensor")


def _repeated(slot: Slot, value: Any, tp: type, repeat: Tuple[Any, Any, Any, Any]) -> Any:
    """The hot path of calling a method in a loop: a value like the last one bound (slot.repeat
    has its type: the same numpy dtype object and shape; or the same array.array typecode and
    length) needs only its new address in slot.t. Returns the object to keep alive, or None
    when the full path of tensor_value must look at it."""
    if tp is array.array:  # always writable
        if value.typecode != repeat[1] or len(value) != repeat[2]:
            return None
        keep = ffi.from_buffer(value)
    else:
        try:
            if value.dtype is not repeat[1] or value.shape != repeat[2]:
                return None
            # The strides need no look: from_buffer asks for a plain (PyBUF_SIMPLE) buffer,
            # which an exporter gives only for C-contiguous memory, i.e. the dense strides of
            # this shape that the last one had. require_writable refuses read-only arrays.
            # Both fail with ValueError or BufferError, and the full path takes over.
            keep = ffi.from_buffer(value, require_writable=True)
        except (TypeError, ValueError, BufferError, AttributeError):
            return None
    slot.readonly = ""
    slot.t.data = keep
    return keep


def tensor_value(slot: Slot, value: Any, plain: bool = False) -> Tuple[Any, Any]:
    """Fill slot.t from `value`; returns (the rt_tensor pointer, the object to keep alive).
    slot.readonly says why the value must not be written ("" when it may).

    plain=True: returns (None, None) instead for the values that the less common interfaces
    take (DLPack, array interfaces, raw pointers, lists, __array__): reading those may have
    effects (a DLPack capsule is consumed), so Method.__call__ binds them one at a time."""
    tp = type(value)
    repeat = slot.repeat
    slot.last = None
    if repeat is not None and tp is repeat[0]:
        keep = _repeated(slot, value, tp, repeat)
        if keep is not None:
            return slot.t, keep
    slot.repeat = repeat = None
    strides: Optional[Tuple[int, ...]] = None
    device = _CPU
    raw_bytes = False
    readonly = ""
    if tp is Tensor:
        ptr, dtype, shape, keep = value._address(), value._dtype, value._shape, value
        strides, device = value._strides, value._device
        if device[0] != 1:
            device = _dlpack.check_device(slot.label, device, slot.device, "a runtime_py Tensor")
        readonly = "a read-only Tensor view" if value._readonly else ""
    elif tp is float or tp is int or tp is bool or isinstance(value, (bool, int, float)):
        shape = slot.shape if slot.static and numel(slot.shape) == 1 else ()
        data, dtype, shape = _pack(slot, [value], shape)
        ptr = keep = ffi.from_buffer(data)
    elif tp is array.array and value.typecode in _FORMATS:  # skip building a memoryview
        dtype, shape = _FORMATS[value.typecode], (len(value),)
        if _COPY_RESIZABLE:
            ptr = keep = _copied(slot, value)
            readonly = _RESIZABLE_COPY
        else:
            ptr = keep = ffi.from_buffer(value)
            repeat = (tp, value.typecode, shape[0], None)
    elif tp is bytearray or tp is bytes:
        if _COPY_RESIZABLE and tp is bytearray:
            ptr = keep = _copied(slot, value)
            readonly = _RESIZABLE_COPY
        else:
            ptr = keep = ffi.from_buffer(value)
            readonly = "bytes are immutable" if tp is bytes else ""
        dtype, shape, raw_bytes = "uint8", (len(value),), True
    else:
        try:
            view: Optional[memoryview] = memoryview(value) if tp is not list else None
        except (TypeError, ValueError):  # ValueError: numpy cannot export bfloat16 ('E')
            view = None
        fmt = view.format if view is not None else None
        dtype = _FORMATS.get(fmt) if fmt is not None else None
        if dtype is not None and view.c_contiguous:  # the fast path: buffers and numpy
            copy = _COPY_RESIZABLE and isinstance(
                value.obj if tp is memoryview else value, (array.array, bytearray))
            if copy:
                ptr = keep = _copied(slot, view)
            elif tp is memoryview:
                keep, ptr = from_buffer(view)
            else:  # export from the object itself, never from a memoryview (see from_buffer)
                ptr = keep = ffi.from_buffer(value)
            shape = view.shape
            # Untyped bytes may be read as the expected dtype; a numpy uint8 array may not.
            raw_bytes = fmt in _RAW_FORMATS and not hasattr(tp, "__array_interface__")
            readonly = _RESIZABLE_COPY if copy else "read-only buffer" if view.readonly else ""
            if _REPEAT_PATH and not readonly and dtype == slot.dtype and \
                    len(shape) == slot.rank and hasattr(tp, "__array_interface__"):
                repeat = (tp, getattr(value, "dtype", None), getattr(value, "shape", None),
                          getattr(value, "strides", None))
        else:
            if plain:
                return None, None
            ptr, dtype, shape, strides, device, keep, raw_bytes, readonly = \
                _slow(slot, value, view)
    slot.readonly = readonly
    rank = len(shape)
    if rank != slot.rank or dtype != slot.dtype:
        if strides is None and slot.static and (dtype == slot.dtype or raw_bytes) and \
                numel(shape) * _dt.DTYPES[dtype].itemsize == slot.nbytes:
            dtype, shape, rank = slot.dtype, slot.shape, slot.rank
        elif rank != slot.rank:
            want = f"shape {slot.shape}" if slot.static else \
                f"rank {slot.rank} (sizes up to {slot.shape})"
            raise InvalidArgument(
                f"{slot.label} expects a {slot.dtype} tensor of {want}; got shape {shape} of "
                f"{dtype} ({numel(shape) * _dt.DTYPES[dtype].itemsize} bytes)")
    t = slot.t
    t.data = ffi.cast("void *", ptr) if isinstance(ptr, int) else ptr
    if dtype is not slot.last_dtype:
        d = _dt.DTYPES[dtype]
        t.dtype.code = d.code
        t.dtype.bits = d.bits
        slot.last_dtype = dtype
    if shape != slot.last_shape:
        t.rank = rank
        if rank:
            slot.sizes[0:rank] = shape
        slot.last_shape = shape
    if strides is None:
        if slot.last_strided:
            t.strides = ffi.NULL
            slot.last_strided = False
    else:
        slot.strides[0:rank] = strides
        t.strides = slot.strides
        slot.last_strided = True
    if device is not slot.last_device:
        t.device.type, t.device.index = device
        slot.last_device = device
    if repeat is not None and (tp is array.array or (repeat[2] == shape and
                                                      None not in repeat)):
        slot.repeat = repeat  # an array.array's descriptor follows from typecode and length
    return t, keep


def _copied(slot: Slot, data: Any) -> Any:
    """`data` (a buffer) copied into the slot's own buffer, made again only when its size
    changes: the binding it replaces pointed there too, and rebinding overwrites it anyway."""
    nbytes = memoryview(data).nbytes
    buf = slot.copy
    if buf is None or len(buf) != nbytes:
        buf = slot.copy = ffi.from_buffer(bytearray(nbytes))
    ffi.memmove(buf, data, nbytes)
    return buf


def prepare(slots: Tuple[Slot, ...], values: Tuple[Any, ...]) -> Optional[list]:
    """Fill every slot's rt_tensor entry from `values` (as many) for rt_method_run; returns
    what each binding keeps alive, or None when the values must be bound one at a time
    instead: one that tensor_value(plain=True) leaves out, or one that is refused (binding
    input by input then raises the error after binding the inputs before it, as set_input
    calls do). slot.readonly is left alone: Method.__call__ binds without allow_mutate."""
    if len(values) != len(slots):
        return None  # Method._bind_all says how many it takes
    keeps = []
    from_buffer = ffi.from_buffer
    try:
        for slot, value in zip(slots, values):
            repeat = slot.repeat
            if repeat is not None:
                tp = type(value)
                if tp is repeat[0]:
                    # _repeated, inline (a call per input is a measurable part of a small
                    # call), and first: the very object of the last call, whose export
                    # slot.last still holds, so its memory cannot have moved or resized
                    # (see _REUSE_EXPORTS).
                    last = slot.last
                    keep = None
                    if tp is array.array:  # typecode and length cannot change while exported
                        if last is not None and value is last[0]:
                            keep = last[1]
                        elif value.typecode == repeat[1] and len(value) == repeat[2]:
                            keep = from_buffer(value)
                    elif value.dtype is repeat[1] and value.shape == repeat[2]:
                        if last is not None and value is last[0] and \
                                value.strides == repeat[3]:  # numpy lets strides be set
                            keep = last[1]
                        else:
                            try:  # see _repeated; read-only is fine here (no allow_mutate)
                                keep = from_buffer(value)
                            except (ValueError, BufferError):
                                pass
                    if keep is not None:
                        if last is None or keep is not last[1]:
                            slot.t.data = keep
                            if _REUSE_EXPORTS:
                                slot.last = (value, keep)
                        keeps.append(keep)
                        continue
            if slot.kind == _v.TENSOR:
                keep = tensor_value(slot, value, True)[1]
                if keep is None:
                    return None
                if slot.repeat is not None and _REUSE_EXPORTS:  # the next call may reuse it
                    slot.last = (value, keep)
            else:
                scalar_value(slot, value)
                keep = None
            keeps.append(keep)
    except Exception:  # noqa: BLE001 - the one-at-a-time path raises it where it belongs
        return None
    return keeps
